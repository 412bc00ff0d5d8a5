"""Property: every request finishes exactly once with exactly max_tokens outputs."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.engine.core import Engine, EngineRequest
from tokenplane.engine.profiles import get_profile

request_st = st.tuples(
    st.floats(min_value=0.0, max_value=2.0),  # arrival
    st.integers(min_value=1, max_value=200),  # prompt length
    st.integers(min_value=1, max_value=60),  # max tokens
    st.integers(min_value=0, max_value=3),  # prefix family
)


@settings(max_examples=60, deadline=None)
@given(
    reqs=st.lists(request_st, min_size=1, max_size=25),
    capacity=st.integers(min_value=17, max_value=80),
    max_seqs=st.integers(min_value=1, max_value=8),
    budget=st.integers(min_value=16, max_value=300),
    aborts=st.sets(st.integers(min_value=0, max_value=24), max_size=4),
)
def test_every_request_finishes_once_with_exact_output(
    reqs: list[tuple[float, int, int, int]],
    capacity: int,
    max_seqs: int,
    budget: int,
    aborts: set[int],
) -> None:
    profile = dataclasses.replace(
        get_profile("llama3-8b-a100"),
        kv_capacity_blocks=capacity,
        max_num_seqs=max_seqs,
        max_num_batched_tokens=budget,
    )
    engine = Engine(profile, seed=3, jitter=0.05)
    bs = profile.block_size
    pending = sorted(
        (
            (at, EngineRequest(f"r{i}", plen, out, [hash((fam, j)) for j in range(plen // bs)]))
            for i, (at, plen, out, fam) in enumerate(reqs)
            if -(-(plen + out) // bs) <= capacity
        ),
        key=lambda item: item[0],
    )
    expected = {req.request_id: req.max_tokens for _, req in pending}
    aborted = {f"r{i}" for i in aborts} & set(expected)
    outputs: dict[str, int] = {}
    finished: dict[str, int] = {}
    t = 0.0
    idx = 0
    steps = 0
    while idx < len(pending) or engine.has_work():
        while idx < len(pending) and pending[idx][0] <= t:
            engine.add(pending[idx][1], pending[idx][0])
            idx += 1
        if steps == 3:
            for rid in aborted:
                fin = engine.abort(rid)
                if fin is not None:
                    assert fin.aborted and rid not in finished
                    finished[rid] = fin.output_tokens
        if not engine.has_work():
            if idx >= len(pending):
                break
            t = pending[idx][0]
            continue
        res = engine.step(t)
        steps += 1
        assert steps < 100_000
        assert res.num_batched_tokens <= budget
        assert res.duration > 0
        t += res.duration
        for rid, n in res.emitted.items():
            assert rid not in finished
            outputs[rid] = outputs.get(rid, 0) + n
        for fin in res.finished:
            assert fin.request_id not in finished
            assert not fin.aborted
            finished[fin.request_id] = fin.output_tokens
        stats = engine.stats()
        assert stats.num_running <= max_seqs
        assert 0 <= stats.kv_blocks_used <= capacity
        assert stats.kv_blocks_cached <= capacity
    assert set(finished) == set(expected)
    for rid, count in finished.items():
        assert outputs.get(rid, 0) == count
        assert count <= expected[rid]
    for rid in set(expected) - aborted:
        assert finished[rid] == expected[rid]
    stats = engine.stats()
    assert stats.kv_blocks_used == 0 and stats.kv_usage == 0.0
    assert stats.num_running == stats.num_waiting == 0
    assert stats.generation_tokens_total == sum(outputs.values())
