"""The engine core in virtual time: batching, chunked prefill, prefix cache, preemption."""

from __future__ import annotations

import dataclasses

import pytest

from tokenplane.engine.core import Engine, EngineRequest
from tokenplane.engine.profiles import EngineProfile, get_profile
from tokenplane.engine.virtual import run_virtual

A100 = get_profile("llama3-8b-a100")


def small(**changes: object) -> EngineProfile:
    return dataclasses.replace(A100, **changes)  # type: ignore[arg-type]


def hashes(prefix: int, n: int) -> list[int]:
    """Chained block hashes: same prefix id and index => same hash."""
    return [hash((prefix, i)) for i in range(n)]


def test_ttft_grows_with_queue_length() -> None:
    profile = small(max_num_seqs=4)
    ttfts = []
    for queued in (1, 8, 32):
        engine = Engine(profile)
        reqs = [(0.0, EngineRequest(f"r{i}", 512, 64)) for i in range(queued)]
        run = run_virtual(engine, reqs)
        ttfts.append(run.timings[f"r{queued - 1}"].ttft)
    assert ttfts[0] < ttfts[1] < ttfts[2]


def test_shared_prefix_cuts_prefill_work() -> None:
    prompt = 64 * 16
    cold = Engine(A100)
    cold_run = run_virtual(cold, [(0.0, EngineRequest("a", prompt, 4, hashes(2, 64)))])
    warm = Engine(A100)
    warm_run = run_virtual(
        warm,
        [
            (0.0, EngineRequest("first", prompt, 4, hashes(1, 64))),
            (10.0, EngineRequest("second", prompt, 4, hashes(1, 64))),
        ],
    )
    second = warm_run.timings["second"]
    assert second.cached_tokens == 63 * 16  # the last block is always recomputed
    assert warm_run.timings["first"].cached_tokens == 0
    assert second.ttft < cold_run.timings["a"].ttft
    # prompt batched once, then only one block (plus decodes) for the second request
    assert warm_run.batched_tokens == prompt + 3 + 16 + 3
    stats = warm.stats()
    assert stats.prefix_queries == 2 * prompt
    assert stats.prefix_hits == 63 * 16
    assert warm.cached_prefix_tokens(hashes(1, 64)) == prompt
    assert warm.cached_prefix_tokens(hashes(3, 64)) == 0


def test_chunked_prefill_respects_token_budget() -> None:
    profile = small(max_num_batched_tokens=256)
    engine = Engine(profile)
    engine.add(EngineRequest("long", 1000, 2), 0.0)
    engine.add(EngineRequest("short", 100, 2), 0.0)
    sizes = []
    first_token_step = None
    t = 0.0
    while engine.has_work():
        res = engine.step(t)
        t += res.duration
        sizes.append(res.num_batched_tokens)
        if "long" in res.emitted and first_token_step is None:
            first_token_step = len(sizes)
    assert max(sizes) <= 256
    assert sizes[:3] == [256, 256, 256]
    assert first_token_step == 4  # 1000 tokens take four chunks
    assert sum(sizes) == 1000 + 1 + 100 + 1


def test_max_num_seqs_respected() -> None:
    engine = Engine(small(max_num_seqs=3))
    for i in range(10):
        engine.add(EngineRequest(f"r{i}", 32, 8), 0.0)
    t = 0.0
    seen = 0
    while engine.has_work():
        res = engine.step(t)
        t += res.duration
        stats = engine.stats()
        assert stats.num_running + len(res.finished) <= 3
        seen += len(res.finished)
    assert seen == 10


def test_preemption_when_blocks_run_out_and_outputs_stay_exact() -> None:
    # 20 blocks of 16 tokens; four requests growing to 5 blocks each cannot all fit.
    engine = Engine(small(kv_capacity_blocks=20))
    for i in range(4):
        engine.add(EngineRequest(f"r{i}", 48, 40), 0.0)
    t = 0.0
    outputs: dict[str, int] = {}
    preempted: list[str] = []
    finished = {}
    batched = 0
    while engine.has_work():
        res = engine.step(t)
        t += res.duration
        batched += res.num_batched_tokens
        preempted += res.preempted
        for rid, n in res.emitted.items():
            outputs[rid] = outputs.get(rid, 0) + n
        for fin in res.finished:
            finished[fin.request_id] = fin
        assert engine.stats().kv_blocks_used <= 20
    assert preempted, "the cache was too small: somebody must have been preempted"
    assert engine.stats().preemptions_total == len(preempted)
    assert set(finished) == {f"r{i}" for i in range(4)}
    for rid, fin in finished.items():
        assert fin.output_tokens == 40 == outputs[rid]
    assert sum(f.preemptions for f in finished.values()) == len(preempted)
    assert engine.stats().kv_blocks_used == 0
    assert batched > 4 * (48 + 40 - 1)  # preempted work was recomputed


def test_abort_frees_blocks() -> None:
    engine = Engine(A100)
    engine.add(EngineRequest("a", 160, 100, hashes(5, 10)), 0.0)
    engine.add(EngineRequest("b", 64, 100), 0.0)
    engine.step(0.0)
    engine.step(1.0)
    assert engine.stats().kv_blocks_used > 0
    fin = engine.abort("a")
    assert fin is not None and fin.aborted and fin.output_tokens == 2
    assert engine.abort("a") is None
    engine.abort("b")
    stats = engine.stats()
    assert stats.kv_blocks_used == 0 and stats.num_running == 0
    assert not engine.has_work()
    # the aborted request's full prompt blocks stay cached for reuse
    assert engine.cached_prefix_tokens(hashes(5, 10)) == 160


def test_abort_waiting_request() -> None:
    engine = Engine(A100)
    engine.add(EngineRequest("w", 10, 5), 0.0)
    fin = engine.abort("w")
    assert fin is not None and fin.output_tokens == 0 and fin.aborted
    assert not engine.has_work()


def test_cached_blocks_evicted_only_under_pressure_lru_first() -> None:
    engine = Engine(small(kv_capacity_blocks=12))
    run_virtual(engine, [(0.0, EngineRequest("a", 64, 1, hashes(1, 4)))])
    run_virtual(engine, [(1.0, EngineRequest("b", 64, 1, hashes(2, 4)))])
    assert engine.stats().kv_blocks_cached == 8
    assert engine.cached_prefix_tokens(hashes(1, 4)) == 64
    # needs 8 blocks, 4 free: evicts the least recently used prefix ("a")
    run_virtual(engine, [(2.0, EngineRequest("c", 120, 1))])
    assert engine.cached_prefix_tokens(hashes(1, 4)) == 0
    assert engine.cached_prefix_tokens(hashes(2, 4)) == 64


def test_step_time_model() -> None:
    profile = A100
    engine = Engine(profile)
    engine.add(EngineRequest("p", 100, 3), 0.0)
    res = engine.step(0.0)
    expect = max(profile.t_floor_s, profile.a_s_per_token * 100) + profile.c_s_per_prefill_sq * 1e4
    assert res.duration == pytest.approx(expect)
    res = engine.step(res.duration)
    expect = profile.t_floor_s + profile.b_s_per_ctx_token * 101
    assert res.duration == pytest.approx(expect)
    assert Engine(get_profile("instant")).step(0.0).duration == 0.0


def test_jitter_is_seeded() -> None:
    def durations(seed: int) -> list[float]:
        engine = Engine(A100, seed=seed, jitter=0.1)
        engine.add(EngineRequest("x", 64, 20), 0.0)
        return [engine.step(0.0).duration for _ in range(20)]

    assert durations(1) == durations(1)
    assert durations(1) != durations(2)


def test_rejects_impossible_and_duplicate_requests() -> None:
    engine = Engine(small(kv_capacity_blocks=4))
    with pytest.raises(ValueError, match="KV blocks"):
        engine.add(EngineRequest("big", 60, 10), 0.0)
    engine.add(EngineRequest("ok", 10, 10), 0.0)
    with pytest.raises(ValueError, match="duplicate"):
        engine.add(EngineRequest("ok", 10, 10), 0.0)
    with pytest.raises(ValueError):
        engine.add(EngineRequest("zero", 10, 0), 0.0)


def test_profiles() -> None:
    from tokenplane.engine.profiles import profile_names

    names = profile_names()
    assert {"llama3-8b-a100", "llama3-8b-h100", "instant"} <= set(names)
    with pytest.raises(KeyError, match="llama3-8b-a100"):
        get_profile("nope")
    # (80 GiB x 0.9 - 14.96 GiB) / 128 KiB per token / 16 tokens per block
    assert 29_000 < A100.kv_capacity_blocks < 29_400
    assert "vidur" in A100.source and "vidur" in get_profile("llama3-8b-h100").source
