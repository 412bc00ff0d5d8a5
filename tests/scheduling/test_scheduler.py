"""GatewayScheduler properties with an injected clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.plugins import RoutingContext
from tokenplane.routing.profiles import build_profile
from tokenplane.scheduling.gate import SaturationGate
from tokenplane.scheduling.scheduler import GatewayScheduler, QueuedRequest
from tokenplane.scheduling.slo import SloClass
from tokenplane.scheduling.vtc import VirtualTokenCounter

INTERACTIVE = SloClass("interactive", priority=0, ttft_s=1.0)
BATCH = SloClass("batch", priority=1, deadline_s=10.0, sheddable=True)


def make(
    profile: str = "least-requests", *, aging: float = 0.0, **kw: object
) -> GatewayScheduler:
    prof = build_profile(profile, RoutingContext(seed=0))
    return GatewayScheduler(prof, aging_tokens_per_s=aging, **kw)  # type: ignore[arg-type]


def one_slot() -> list[EndpointState]:
    """One replica that can take exactly one more request per release call."""
    return [EndpointState("e0", max_waiting=1)]


def q(rid: str, cls: SloClass, t: float, tenant: str = "t", prompt: int = 100,
      out: int = 10) -> QueuedRequest:
    return QueuedRequest(
        RouteRequest(rid, tenant=tenant, prompt_tokens=prompt, predicted_output=out), cls, t
    )


def test_interactive_goes_before_earlier_batch() -> None:
    s = make()
    s.submit(q("b1", BATCH, 0.0), 0.0)
    s.submit(q("b2", BATCH, 0.1), 0.1)
    s.submit(q("i1", INTERACTIVE, 0.2), 0.2)
    order = [s.release(one_slot(), 1.0)[0][0].route.request_id for _ in range(3)]
    assert order == ["i1", "b1", "b2"]
    assert len(s) == 0


def test_nothing_released_when_all_saturated() -> None:
    s = make()
    s.submit(q("i1", INTERACTIVE, 0.0), 0.0)
    full = [EndpointState("e0", kv_usage=0.99), EndpointState("e1", num_waiting=5, max_waiting=4)]
    assert s.release(full, 1.0) == []
    assert len(s) == 1
    assert s.stats["interactive"].queued == 1


def test_late_binding_counts_its_own_dispatches() -> None:
    s = make()
    for i in range(10):
        s.submit(q(f"i{i}", INTERACTIVE, 0.0), 0.0)
    eps = [EndpointState("a", max_waiting=2), EndpointState("b", max_waiting=2)]
    out = s.release(eps, 0.5)
    assert len(out) == 4
    assert sorted(eid for _, eid in out) == ["a", "a", "b", "b"]


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["i", "b", "release"]), st.integers(0, 3)), max_size=60
    )
)
def test_interactive_never_waits_behind_batch(ops: list[tuple[str, int]]) -> None:
    s = make()
    now = 0.0
    queued_i = 0
    for n, (op, k) in enumerate(ops):
        now += 0.01
        if op == "release":
            eps = [EndpointState(f"e{j}", max_waiting=1) for j in range(k)]
            out = s.release(eps, now)
            classes = [item.slo.name for item, _ in out]
            # all interactive releases come first, and a batch one only when none is left
            n_i = classes.count("interactive")
            assert classes == ["interactive"] * n_i + ["batch"] * (len(classes) - n_i)
            queued_i -= n_i
            if "batch" in classes:
                assert queued_i == 0
        else:
            s.submit(q(f"r{n}", INTERACTIVE if op == "i" else BATCH, now), now)
            queued_i += op == "i"


@settings(max_examples=40, deadline=None)
@given(
    sizes_a=st.lists(st.integers(1, 500), min_size=30, max_size=30),
    sizes_b=st.lists(st.integers(1, 500), min_size=30, max_size=30),
    weight_a=st.sampled_from([1.0, 2.0, 3.0]),
)
def test_fairness_bound_between_two_backlogged_tenants(
    sizes_a: list[int], sizes_b: list[int], weight_a: float
) -> None:
    vtc = VirtualTokenCounter({"A": weight_a, "B": 1.0}, input_weight=1.0, output_weight=1.0)
    s = make(vtc=vtc)
    for i, (a, b) in enumerate(zip(sizes_a, sizes_b, strict=True)):
        s.submit(q(f"a{i}", INTERACTIVE, 0.0, tenant="A", prompt=a, out=0), 0.0)
        s.submit(q(f"b{i}", INTERACTIVE, 0.0, tenant="B", prompt=b, out=0), 0.0)
    served = {"A": 0, "B": 0}
    biggest = max(*sizes_a, *sizes_b)
    # while both tenants stay backlogged, normalised service differs by at most one request
    for step in range(40):
        item, _ = s.release(one_slot(), 1.0 + step)[0]
        served[item.route.tenant] += item.route.prompt_tokens
        if served["A"] >= sum(sizes_a) or served["B"] >= sum(sizes_b):
            break
        assert abs(served["A"] / weight_a - served["B"]) <= biggest


def test_returning_tenant_gets_no_banked_credit() -> None:
    vtc = VirtualTokenCounter(input_weight=1.0, output_weight=0.0)
    s = make(vtc=vtc)
    for i in range(20):
        s.submit(q(f"a{i}", INTERACTIVE, 0.0, tenant="A", prompt=100), 0.0)
    for step in range(10):
        s.release(one_slot(), float(step))
    # B arrives late; it is lifted to A's counter, so service alternates from here
    for i in range(10):
        s.submit(q(f"b{i}", INTERACTIVE, 10.0, tenant="B", prompt=100), 10.0)
    assert vtc.counter("B") == vtc.counter("A")
    order = [s.release(one_slot(), 11.0 + k)[0][0].route.tenant for k in range(6)]
    assert order.count("A") == 3 and order.count("B") == 3


def test_shortest_job_first_inside_a_tenant() -> None:
    s = make()
    s.submit(q("big", INTERACTIVE, 0.0, prompt=5000), 0.0)
    s.submit(q("small", INTERACTIVE, 0.0, prompt=10), 0.0)
    assert s.release(one_slot(), 0.1)[0][0].route.request_id == "small"


@pytest.mark.parametrize("late_defer_s", [0.0, 30.0])
def test_aging_prevents_starvation(late_defer_s: float) -> None:
    aging = 100.0  # tokens of priority per second waited
    s = make(aging=aging, late_defer_s=late_defer_s)
    s.submit(q("big", INTERACTIVE, 0.0, prompt=2000, out=0), 0.0)
    released_at = None
    t = 0.0
    for k in range(1000):
        t = k * 0.5
        s.submit(q(f"s{k}", INTERACTIVE, t, prompt=50, out=0), t)
        item, _ = s.release(one_slot(), t)[0]
        if item.route.request_id == "big":
            released_at = t
            break
    assert released_at is not None
    # big wins once 2000 < 50 + aging * (t - 0) for the newest small job: t > 19.5 s;
    # once it has missed its TTFT it is deferred by late_defer_s of aging, no more
    assert released_at <= (2000 + aging * late_defer_s - 50) / aging + 1.0
    if late_defer_s:
        assert released_at > (2000 - 50) / aging + 1.0


def test_without_aging_big_job_starves() -> None:
    s = make(aging=0.0)
    s.submit(q("big", INTERACTIVE, 0.0, prompt=2000, out=0), 0.0)
    for k in range(100):
        t = k * 0.5
        s.submit(q(f"s{k}", INTERACTIVE, t, prompt=50, out=0), t)
        item, _ = s.release(one_slot(), t)[0]
        assert item.route.request_id != "big"


def test_expire_sheds_batch_past_deadline_with_retry_after() -> None:
    s = make(decode_s_per_token=0.01)
    s.submit(q("b1", BATCH, 0.0, out=100), 0.0)  # needs >= 1 s of decode
    assert s.expire(8.5) == []
    shed = s.expire(9.5)
    assert [x.item.route.request_id for x in shed] == ["b1"]
    assert shed[0].retry_after_s >= 1.0
    assert s.stats["batch"].shed == 1 and len(s) == 0


def test_interactive_never_shed_while_batch_waits() -> None:
    sheddable_interactive = SloClass("interactive", priority=0, deadline_s=1.0, sheddable=True)
    s = make()
    s.submit(q("i1", sheddable_interactive, 0.0, out=0), 0.0)
    s.submit(q("b1", SloClass("batch", priority=1, deadline_s=1000.0), 0.0, out=0), 0.0)
    assert s.expire(50.0) == []
    assert len(s) == 2


def test_submit_sheds_when_deadline_out_of_reach() -> None:
    s = make(drain_tokens_per_s=100.0)
    for i in range(5):
        assert s.submit(q(f"b{i}", BATCH, 0.0, prompt=100, out=0), 0.0) is None
    # 500 tokens ahead at 100 tokens/s is 5 s; another 600 makes the 10 s deadline unreachable
    for i in range(5, 11):
        s.submit(q(f"b{i}", BATCH, 0.0, prompt=100, out=0), 0.0)
    shed = s.submit(q("late", BATCH, 0.0, prompt=100, out=0), 0.0)
    assert shed is not None and shed.retry_after_s >= 1.0
    st_b = s.stats["batch"]
    assert (st_b.submitted, st_b.shed, st_b.queued) == (12, 1, 11)


def test_wait_stats() -> None:
    s = make()
    s.submit(q("i1", INTERACTIVE, 0.0), 0.0)
    s.release(one_slot(), 2.5)
    st_i = s.stats["interactive"]
    assert st_i.released == 1 and st_i.wait_sum_s == pytest.approx(2.5)
    assert st_i.wait_max_s == pytest.approx(2.5)


def test_waits_for_warm_replica_instead_of_going_cold() -> None:
    ctx = RoutingContext(block_size=16)
    prof = build_profile("tokenplane", ctx)
    s = GatewayScheduler(prof, gate=SaturationGate())
    hashes = tuple(range(1000, 1060))
    ctx.record(RouteRequest("turn1", prompt_tokens=960, block_hashes=hashes), "warm")
    s.submit(
        QueuedRequest(
            RouteRequest("turn2", prompt_tokens=1000, block_hashes=(*hashes, 7)), INTERACTIVE, 0.0
        ),
        0.0,
    )
    s.submit(q("other", INTERACTIVE, 0.0), 0.0)
    eps = [
        EndpointState("warm", num_waiting=1, max_waiting=1, prefill_s_per_token=1e-4),
        EndpointState("cold", max_waiting=4, prefill_s_per_token=1e-4),
    ]
    out = s.release(eps, 0.1)
    assert [(i.route.request_id, e) for i, e in out] == [("other", "cold")]
    eps[0] = EndpointState("warm", max_waiting=1, prefill_s_per_token=1e-4)
    out = s.release(eps, 0.2)
    assert [(i.route.request_id, e) for i, e in out] == [("turn2", "warm")]


def test_batch_promoted_to_full_gate_share_near_its_deadline() -> None:
    slow_batch = SloClass("batch", priority=1, deadline_s=100.0, gate_fraction=0.2)
    s = make(promote_after=0.5)
    s.submit(q("b1", slow_batch, 0.0), 0.0)
    busy = [EndpointState("e0", inflight_decode_tokens=500, token_capacity=1000)]
    assert s.release(busy, 10.0) == []  # 500 >= 0.2 * 1000: no room for batch
    out = s.release(busy, 50.0)  # waited half its deadline: full share, 500 < 1000
    assert [i.route.request_id for i, _ in out] == ["b1"]


@pytest.mark.parametrize(
    ("case", "slo", "old_arrival", "late_defer_s", "first"),
    [
        ("waited past its TTFT target: the fresh request goes first", INTERACTIVE, 0.0, 30.0,
         "fresh"),
        ("still within its TTFT target: plain SJF with aging", INTERACTIVE, 3.5, 30.0, "old"),
        ("deferral off", INTERACTIVE, 0.0, 0.0, "old"),
        ("no TTFT target (batch): never late", BATCH, 0.0, 30.0, "old"),
        ("late but 30 s older than the fresh one: aging wins back", INTERACTIVE, -40.0, 30.0,
         "old"),
    ],
)
def test_late_requests_yield_to_ones_that_can_still_meet_their_slo(
    case: str, slo: SloClass, old_arrival: float, late_defer_s: float, first: str
) -> None:
    s = make(aging=200.0, late_defer_s=late_defer_s)
    now = 4.0
    s.submit(q("old", slo, old_arrival, prompt=100), old_arrival)
    s.submit(q("fresh", slo, now, prompt=100), now)
    order = [s.release(one_slot(), now + k)[0][0].route.request_id for k in range(2)]
    assert order[0] == first, case
    assert sorted(order) == ["fresh", "old"]


def test_a_late_request_is_deferred_once() -> None:
    s = make(aging=200.0, late_defer_s=30.0)
    s.submit(q("old", INTERACTIVE, 0.0, prompt=100), 0.0)
    s.submit(q("fresh", INTERACTIVE, 1.9, prompt=100), 1.9)
    assert s.release(one_slot(), 2.0)[0][0].route.request_id == "fresh"  # old deferred
    # both late now; old's key is 100 + 30 x 200 = 6,100, a newcomer's 100 + 200 x 2.5
    s.submit(q("new", INTERACTIVE, 2.5, prompt=100), 2.5)
    assert s.release(one_slot(), 2.5)[0][0].route.request_id == "new"
    # new is not late yet; once old's extra key is earned back it goes before later ones
    s.submit(q("later", INTERACTIVE, 40.0, prompt=100), 40.0)
    assert s.release(one_slot(), 40.0)[0][0].route.request_id == "old"


def test_a_shed_late_request_leaves_no_deferral_mark() -> None:
    late_batch = SloClass("batch-ttft", priority=1, ttft_s=1.0, deadline_s=10.0, sheddable=True)
    s = make(aging=200.0, late_defer_s=30.0)
    s.submit(q("hot", INTERACTIVE, 0.0), 0.0)
    s.submit(q("b0", late_batch, 0.0), 0.0)
    s.submit(q("b1", late_batch, 4.0), 4.0)
    released = s.release([EndpointState("e0", max_waiting=2)], 5.0)
    assert [i.route.request_id for i, _ in released] == ["hot", "b1"]  # b0 deferred
    assert len(s._deferred) == 1
    assert [x.item.route.request_id for x in s.expire(20.0)] == ["b0"]
    assert not s._deferred and len(s) == 0
