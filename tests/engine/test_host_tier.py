"""The host-DRAM KV tier: HBM -> host -> gone, loads instead of recompute, stats."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.engine.core import Engine, EngineRequest
from tokenplane.engine.kv_cache import KVCache
from tokenplane.engine.profiles import GIB, EngineProfile, get_profile
from tokenplane.engine.serving.metrics import EngineMetricsExporter
from tokenplane.engine.virtual import run_virtual

A100 = get_profile("llama3-8b-a100")
OFFLOAD = get_profile("llama3-8b-a100-offload")


def hashes(prefix: int, n: int) -> list[int]:
    return [hash((prefix, i)) for i in range(n)]


def with_host(hbm_blocks: int, host_blocks: int) -> EngineProfile:
    return dataclasses.replace(
        A100,
        kv_capacity_blocks=hbm_blocks,
        host_kv_gib=host_blocks * A100.kv_bytes_per_block / GIB,
    )


def test_profiles_default_off_and_offload_profile() -> None:
    for name in ("llama3-8b-a100", "llama3-8b-h100", "instant"):
        assert get_profile(name).host_kv_blocks == 0
    assert A100.kv_bytes_per_block == 128 * 1024 * 16  # 2 MiB per 16-token block
    # 224 GiB of host DRAM / 2 MiB per block
    assert OFFLOAD.host_kv_blocks == 224 * 1024 // 2
    assert OFFLOAD.kv_capacity_blocks == A100.kv_capacity_blocks
    assert OFFLOAD.host_load_s_per_block == pytest.approx(2 * 1024**2 / 25e9)
    assert "DGX A100" in OFFLOAD.source and "PCIe" in OFFLOAD.source
    assert with_host(12, 8).host_kv_blocks == 8
    with pytest.raises(ValueError):
        dataclasses.replace(A100, host_link_gbps=0.0)
    with pytest.raises(ValueError, match="model shape"):
        dataclasses.replace(get_profile("instant"), host_kv_gib=1.0)


def test_eviction_order_hbm_then_host_then_gone() -> None:
    kv = KVCache(total_blocks=2, block_size=16, host_blocks=2)
    assert kv.allocate(2)
    kv.promote(1)
    kv.promote(2)
    kv.release([1, 2], 0)  # LRU: 2 (tail) first, then 1
    assert kv.allocate(1)
    assert kv.num_host == 1 and kv.cached_prefix_blocks([1]) == 1
    assert kv.match_tiers([1, 2], 5) == (2, 1, 1)  # 1 idle in HBM, 2 on the host
    assert kv.allocate(1)
    assert kv.cached_prefix_blocks([1]) == 0 and kv.match_tiers([1, 2], 5) == (2, 0, 2)
    kv.release([], 2)
    assert kv.allocate(2)
    kv.promote(3)
    kv.promote(4)
    kv.release([3, 4], 0)
    assert kv.allocate(2)  # offloads 4 then 3: the host tier drops 2, then 1
    assert kv.offloaded == 4 and kv.host_dropped == 2 and kv.num_host == 2
    assert kv.match_tiers([1, 2], 5) == (0, 0, 0)  # gone
    assert kv.match_tiers([3, 4, 5], 5) == (2, 0, 2)
    # a load moves the blocks back to HBM and out of the host tier
    kv.release([], 2)
    assert kv.acquire_prefix([3, 4], 2, 0) == 2
    assert kv.num_host == 0 and kv.num_cached == 2 and kv.num_used == 2
    assert kv.host_loaded == 2
    kv.release([3, 4], 0)
    assert kv.num_evictable == 2 and kv.num_used == 0


def test_without_host_tier_evicted_blocks_are_dropped() -> None:
    kv = KVCache(total_blocks=1, block_size=16)
    kv.allocate(1)
    kv.promote(7)
    kv.release([7], 0)
    assert kv.allocate(1)
    assert kv.num_host == 0 and kv.match_tiers([7], 1) == (0, 0, 0)
    assert kv.offloaded == 0


def _evict_then_return(profile: EngineProfile) -> tuple[Engine, list[float], int]:
    """a and b fill the prefix cache, c evicts a's prefix, d comes back to it."""
    engine = Engine(profile)
    run_virtual(engine, [(0.0, EngineRequest("a", 64, 1, hashes(1, 4)))])
    run_virtual(engine, [(1.0, EngineRequest("b", 64, 1, hashes(2, 4)))])
    run_virtual(engine, [(2.0, EngineRequest("c", 120, 1))])
    assert engine.cached_prefix_tokens(hashes(1, 4)) == 0  # not in HBM any more
    engine.add(EngineRequest("d", 64, 1, hashes(1, 4)), 3.0)
    res = engine.step(3.0)
    return engine, [res.duration], res.num_batched_tokens


def test_host_hit_avoids_recompute_but_costs_the_transfer() -> None:
    hbm_only, (cold_dur,), cold_tokens = _evict_then_return(with_host(12, 0))
    tiered, (warm_dur,), warm_tokens = _evict_then_return(with_host(12, 8))
    assert cold_tokens == 64  # recomputed from scratch
    assert warm_tokens == 16  # 3 blocks loaded, the last block recomputed
    p = with_host(12, 8)
    assert cold_dur == pytest.approx(
        max(p.t_floor_s, p.a_s_per_token * 64) + p.c_s_per_prefill_sq * 64 * 64
    )
    compute = max(p.t_floor_s, p.a_s_per_token * 16) + p.c_s_per_prefill_sq * 16 * 16
    assert warm_dur == pytest.approx(compute + 3 * p.host_load_s_per_block)
    assert warm_dur > compute
    assert tiered.tiered_prefix_tokens(hashes(1, 4)) == 64
    stats = tiered.stats()
    assert stats.prefix_hits == 48 and stats.host_prefix_hits == 48
    assert stats.host_blocks_loaded_total == 3
    assert stats.host_kv_blocks_total == 8
    cold = hbm_only.stats()
    assert cold.prefix_hits == 0 and cold.host_prefix_hits == 0
    assert cold.host_kv_blocks_total == 0


def test_finished_request_reports_host_tokens_and_hbm_hits_cost_nothing() -> None:
    engine = Engine(with_host(12, 8))
    run_virtual(engine, [(0.0, EngineRequest("a", 64, 1, hashes(1, 4)))])
    run_virtual(engine, [(1.0, EngineRequest("b", 64, 1, hashes(2, 4)))])
    run_virtual(engine, [(2.0, EngineRequest("c", 120, 1))])
    run = run_virtual(engine, [(3.0, EngineRequest("d", 64, 2, hashes(1, 4)))])
    assert run.timings["d"].cached_tokens == 48
    # b's prefix is still in HBM: a hit there loads nothing
    engine.add(EngineRequest("e", 64, 1, hashes(2, 4)), 10.0)
    res = engine.step(10.0)
    assert res.finished[0].cached_tokens == 48 and res.finished[0].host_cached_tokens == 0
    p = with_host(12, 8)
    assert res.duration == pytest.approx(
        max(p.t_floor_s, p.a_s_per_token * 16) + p.c_s_per_prefill_sq * 256
    )
    assert engine.stats().host_prefix_hits == 48


def test_metrics_expose_host_tier_under_our_own_names() -> None:
    engine, _, _ = _evict_then_return(with_host(12, 8))
    text = EngineMetricsExporter(engine, "m").render().decode()
    assert 'tokenplane_sim:host_prefix_cache_hits_total{model_name="m"} 48.0' in text
    assert 'tokenplane_sim:host_kv_blocks_loaded_total{model_name="m"} 3.0' in text
    assert 'vllm:prefix_cache_hits_total{model_name="m"} 48.0' in text
    plain = EngineMetricsExporter(Engine(A100), "m").render().decode()
    assert "tokenplane_sim:" not in plain


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["alloc", "promote", "release", "load"]),
                              st.integers(min_value=0, max_value=5)), max_size=60))
def test_tiers_stay_disjoint_and_bounded(ops: list[tuple[str, int]]) -> None:
    total, host_total = 8, 5
    kv = KVCache(total_blocks=total, block_size=16, host_blocks=host_total)
    private = 0
    cached: list[int] = []
    next_hash = 0
    for op, n in ops:
        if op == "alloc":
            if kv.allocate(n):
                private += n
        elif op == "promote" and private:
            next_hash += 1
            if kv.promote(next_hash):
                private -= 1
                cached.append(next_hash)
        elif op == "release":
            kv.release(cached, private)
            private = 0
            cached = []
        elif op == "load":
            want = [h for h in range(next_hash - n, next_hash + 1) if h > 0]
            hit, idle, on_host = kv.match_tiers(want, len(want))
            if on_host and on_host <= kv.available() - idle:
                assert kv.acquire_prefix(want, hit, 0) == on_host
                cached.extend(want[:hit])
        assert kv.num_host <= host_total and kv.num_free >= 0
        assert kv.num_used == private + len(set(cached))
        assert kv.num_private + kv.num_cached <= total
        # every hash sits in at most one tier
        present = sum(kv.tiered_prefix_blocks([h]) for h in range(1, next_hash + 1))
        assert present == kv.num_cached + kv.num_host
        assert kv.offloaded - kv.host_loaded - kv.host_dropped == kv.num_host
