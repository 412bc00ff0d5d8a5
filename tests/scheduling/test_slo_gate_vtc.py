"""SLO classes from config, the saturation gate, and virtual token counters."""

from __future__ import annotations

import pytest

from tokenplane.routing.endpoint import BREAKER_OPEN, EndpointState
from tokenplane.scheduling.gate import SaturationGate
from tokenplane.scheduling.slo import default_slo_classes, slo_classes_from_config
from tokenplane.scheduling.vtc import VirtualTokenCounter


def test_slo_from_config_and_met() -> None:
    classes = slo_classes_from_config(
        {
            "interactive": {"priority": 0, "ttft_s": 1, "tpot_s": 0.05},
            "batch": {"priority": 2, "deadline_s": 600, "sheddable": True, "gate_fraction": 0.5},
        }
    )
    i, b = classes["interactive"], classes["batch"]
    assert i.met(ttft_s=0.9, tpot_s=0.04, e2e_s=100)
    assert not i.met(ttft_s=1.1, tpot_s=0.04, e2e_s=2)
    assert not i.met(ttft_s=0.5, tpot_s=0.06, e2e_s=2)
    assert b.met(ttft_s=300, tpot_s=1, e2e_s=599) and not b.met(ttft_s=0, tpot_s=0, e2e_s=601)
    assert b.sheddable and b.gate_fraction == 0.5 and b.priority == 2
    assert set(default_slo_classes()) == {"interactive", "batch"}


@pytest.mark.parametrize(
    "bad",
    [{"x": {"ttft": 1}}, {"x": {"ttft_s": -1}}, {"x": {"gate_fraction": 0}}],
)
def test_slo_config_errors(bad: dict[str, dict[str, float]]) -> None:
    with pytest.raises(ValueError):
        slo_classes_from_config(bad)


GATE = SaturationGate(kv_limit=0.9)


@pytest.mark.parametrize(
    ("ep", "fraction", "ok"),
    [
        (EndpointState("a"), 1.0, True),
        (EndpointState("a", healthy=False), 1.0, False),
        (EndpointState("a", breaker_state=BREAKER_OPEN), 1.0, False),
        (EndpointState("a", kv_usage=0.89), 1.0, True),
        (EndpointState("a", kv_usage=0.9), 1.0, False),
        (EndpointState("a", kv_usage=0.5), 0.5, False),
        (EndpointState("a", num_waiting=3, max_waiting=4), 1.0, True),
        (EndpointState("a", num_waiting=4, max_waiting=4), 1.0, False),
        (EndpointState("a", num_waiting=2, max_waiting=4), 0.5, False),
        (EndpointState("a", num_running=250, inflight_requests=256, max_num_seqs=256), 1.0, False),
        (EndpointState("a", inflight_prefill_tokens=100, prefill_capacity=100), 1.0, False),
        (EndpointState("a", inflight_decode_tokens=50, token_capacity=100), 0.5, False),
        (EndpointState("a", inflight_decode_tokens=49, token_capacity=100), 0.5, True),
    ],
)
def test_gate(ep: EndpointState, fraction: float, ok: bool) -> None:
    assert GATE.accepts(ep, fraction) is ok


def test_vtc_weights_and_lift() -> None:
    v = VirtualTokenCounter({"gold": 2.0}, input_weight=1.0, output_weight=2.0)
    v.charge("gold", 100, 50)  # (100 + 100) / 2
    v.charge("free", 100, 50)
    assert v.counter("gold") == 100.0 and v.counter("free") == 200.0
    assert v.pick(["gold", "free"]) == "gold"
    v.on_backlogged("new", ["gold", "free"])
    assert v.counter("new") == 100.0
    v.on_backlogged("gold", ["free"])  # lifted to the smallest backlogged counter
    assert v.counter("gold") == 200.0
    v.charge("free", 100, 0)
    v.on_backlogged("free", ["gold"])  # never lowered
    assert v.counter("free") == 300.0
    with pytest.raises(ValueError):
        VirtualTokenCounter({"x": 0.0})
