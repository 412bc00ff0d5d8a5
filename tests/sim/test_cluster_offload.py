"""The cluster on engines with a host-DRAM KV tier: same policies, more prefix hits."""

from __future__ import annotations

import dataclasses

from tokenplane.engine.profiles import GIB, EngineProfile, get_profile
from tokenplane.scheduling.slo import default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, builtin_policies
from tokenplane.sim.metrics import summarize
from tokenplane.sim.traces import TraceRequest
from tokenplane.sim.workload import WorkloadRules, assign

A100 = get_profile("llama3-8b-a100")


def conversations(n: int = 240, gap: float = 0.05, sessions: int = 24) -> list[TraceRequest]:
    """Turn t of session k re-sends the session's history (20 blocks per turn)."""
    out = []
    for i in range(n):
        k, turn = i % sessions, i // sessions
        hashes = tuple(range(k * 10_000, k * 10_000 + 20 * (turn + 1)))
        out.append(TraceRequest(i * gap, 16 * len(hashes) + 7, 20 + (i * 37) % 100, hashes))
    return out


def engines(host_blocks: int) -> EngineProfile:
    return dataclasses.replace(
        A100, kv_capacity_blocks=400, host_kv_gib=host_blocks * A100.kv_bytes_per_block / GIB
    )


def run(policy: str, profile: EngineProfile) -> ClusterSim:
    sim = ClusterSim(
        builtin_policies()[policy], profile, default_slo_classes(), ClusterConfig(replicas=2)
    )
    sim.run(assign(conversations(), WorkloadRules(seed=0)))
    return sim


def test_host_tier_raises_the_hit_rate_for_every_policy() -> None:
    for policy in ("round-robin", "tokenplane"):
        hbm = run(policy, engines(0))
        tiered = run(policy, engines(4000))
        recs = list(tiered.records.values())
        assert all(r.done for r in recs)
        assert all(0 <= r.host_cached_tokens <= r.cached_tokens for r in recs)
        s_hbm = summarize(list(hbm.records.values()), span_s=12.0, block_size=16)
        s_tier = summarize(recs, span_s=12.0, block_size=16)
        assert s_hbm["host_prefix_hit_rate"] == 0.0
        assert s_tier["host_prefix_hit_rate"] > 0.0
        assert s_tier["prefix_hit_rate"] > s_hbm["prefix_hit_rate"] + 0.1
        assert s_tier["prefix_hit_rate"] <= s_tier["oracle_prefix_hit_rate"]
        loaded = sum(e.stats().host_prefix_hits for e in tiered.engines)
        assert loaded == sum(r.host_cached_tokens for r in recs)


def test_gateway_prefix_index_covers_both_tiers() -> None:
    offload = get_profile("llama3-8b-a100-offload")
    sim = ClusterSim(builtin_policies()["tokenplane"], offload, default_slo_classes(),
                     ClusterConfig(replicas=2))
    assert sim.ctx.prefix_index.capacity_blocks == (
        offload.kv_capacity_blocks + offload.host_kv_blocks
    )
    plain = ClusterSim(builtin_policies()["tokenplane"], A100, default_slo_classes(),
                       ClusterConfig(replicas=2))
    assert plain.ctx.prefix_index.capacity_blocks == 100_000  # unchanged default
    fixed = ClusterSim(builtin_policies()["tokenplane"], offload, default_slo_classes(),
                       ClusterConfig(replicas=2, prefix_index_blocks=500))
    assert fixed.ctx.prefix_index.capacity_blocks == 500
