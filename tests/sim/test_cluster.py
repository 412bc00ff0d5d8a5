"""The virtual-time cluster: determinism, conservation, and policy behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplane.engine.profiles import get_profile
from tokenplane.routing.profiles import DEFAULT_PROFILE, PROFILES
from tokenplane.scheduling.slo import default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, builtin_policies
from tokenplane.sim.runner import parse_loads, run_simulation
from tokenplane.sim.traces import TraceRequest
from tokenplane.sim.workload import WorkloadRules, assign
from tokenplane.tokens.predictor import LengthPredictor

PROFILE = get_profile("llama3-8b-a100")


def synthetic(n: int = 300, gap: float = 0.05, sessions: int = 20) -> list[TraceRequest]:
    """Conversations: turn t of session k re-sends the session's history and adds to it."""
    out = []
    for i in range(n):
        k, turn = i % sessions, i // sessions
        hashes = tuple(range(k * 10_000, k * 10_000 + 20 * (turn + 1)))
        prompt = 16 * len(hashes) + 7
        out.append(TraceRequest(i * gap, prompt, 20 + (i * 37) % 200, hashes))
    return out


def run(policy: str, reqs: list[TraceRequest], seed: int = 0) -> ClusterSim:
    sim = ClusterSim(
        builtin_policies()[policy],
        PROFILE,
        default_slo_classes(),
        ClusterConfig(replicas=3, seed=seed),
    )
    sim.run(assign(reqs, WorkloadRules(seed=seed)))
    return sim


def fingerprint(sim: ClusterSim) -> list[tuple[str, int, float, float, int]]:
    return [
        (rid, r.endpoint, r.first_token, r.finish, r.cached_tokens)
        for rid, r in sorted(sim.records.items())
    ]


@pytest.mark.parametrize("policy", sorted(builtin_policies()))
def test_every_request_finishes_and_counters_return_to_zero(policy: str) -> None:
    reqs = synthetic()
    sim = run(policy, reqs)
    assert len(sim.records) == len(reqs)
    assert all(r.done or r.shed for r in sim.records.values())
    for r in sim.records.values():
        if r.done:
            assert r.output_tokens == r.req.output_tokens
            assert r.req.arrival <= r.dispatched <= r.first_token <= r.finish
    assert sim.inflight == [0, 0, 0]
    assert sim.inflight_prefill == [0, 0, 0]
    assert sim.inflight_decode == [0, 0, 0]


def test_deterministic_for_a_seed() -> None:
    reqs = synthetic()
    a = fingerprint(run("tokenplane", reqs, seed=3))
    b = fingerprint(run("tokenplane", reqs, seed=3))
    assert a == b
    c = fingerprint(run("vllm-fcfs", reqs, seed=3))
    d = fingerprint(run("vllm-fcfs", reqs, seed=4))
    assert c != d  # random routing follows the seed


def test_prefix_aware_policy_hits_the_cache_more_than_round_robin() -> None:
    reqs = synthetic(gap=0.2)
    hits = {}
    for p in ("round-robin", "tokenplane"):
        sim = run(p, reqs)
        hits[p] = sum(r.cached_tokens for r in sim.records.values())
    assert hits["tokenplane"] > hits["round-robin"]


def test_parse_loads() -> None:
    assert parse_loads("0.5:1.0:0.25") == [0.5, 0.75, 1.0]
    assert parse_loads("1,2, 4") == [1.0, 2.0, 4.0]
    for bad in ("1:0.5:0.1", "1:2", "0,1", ""):
        with pytest.raises(ValueError):
            parse_loads(bad)


def test_run_simulation_writes_results_and_plots(tmp_path: Path) -> None:
    trace = tmp_path / "mini.csv"
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens"]
    rows += [f"{i * 0.05:.3f},{200 + (i * 53) % 900},{10 + (i * 17) % 90}" for i in range(200)]
    trace.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    res = run_simulation(
        trace, replicas=2, policies=["round-robin", "tokenplane"], loads=[1.0, 2.0],
        seed=1, out_dir=out,
    )
    data = json.loads((out / "results.json").read_text())
    assert data["schema_version"] == 1
    assert set(data["policies"]) == {"round-robin", "tokenplane"}
    for pol in data["policies"].values():
        assert len(pol["points"]) == 2
        assert pol["goodput_rps"] >= 0.0
        pt = pol["points"][0]
        for key in ("rate_rps", "slo_attainment", "ttft_p99_s", "tpot_p50_s", "e2e_p99_s",
                    "prefix_hit_rate", "preemptions", "tokens_per_tenant", "jain_index",
                    "per_class"):
            assert key in pt
    assert res["policies"]["round-robin"]["points"][1]["load"] == 2.0
    assert (out / "latency_vs_load.png").stat().st_size > 1000
    assert (out / "attainment_vs_load.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="unknown policy"):
        run_simulation(trace, policies=["nope"])


def test_snapshots_fill_every_field_like_the_gateway() -> None:
    cfg = ClusterConfig(replicas=2, price_input_per_mtok="0.20", price_output_per_mtok="0.60")
    sim = ClusterSim(builtin_policies()[DEFAULT_PROFILE], PROFILE, default_slo_classes(), cfg)
    for snap in sim.snapshots():
        assert snap.cost_per_token == pytest.approx(4e-7)  # (0.20 + 0.60) / 2 per 1M
        assert snap.prefill_s_per_token == PROFILE.a_s_per_token
        assert snap.max_num_seqs == PROFILE.max_num_seqs
        assert snap.max_waiting == cfg.max_waiting
        assert snap.token_capacity == sim.token_capacity
        assert snap.prefill_capacity == sim.prefill_capacity
    default = ClusterSim(builtin_policies()[DEFAULT_PROFILE], PROFILE, default_slo_classes(),
                         ClusterConfig(replicas=2))  # the embedded default model's prices
    assert all(s.cost_per_token == pytest.approx(2.5e-7) for s in default.snapshots())
    free = ClusterSim(builtin_policies()[DEFAULT_PROFILE], PROFILE, default_slo_classes(),
                      ClusterConfig(replicas=2, price_input_per_mtok="0",
                                    price_output_per_mtok="0"))
    assert {s.cost_per_token for s in free.snapshots()} == {0.0}


def test_output_lengths_are_predicted_by_the_gateways_predictor() -> None:
    sim = run(DEFAULT_PROFILE, synthetic(n=120))
    assert isinstance(sim.predictor, LengthPredictor)
    recs = sorted(sim.records.values(), key=lambda r: r.req.arrival)
    assert recs[0].predicted == 256  # the default before any history
    key = ClusterSim.length_key(recs[-1].req)
    assert key.model == "sim" and key.tenant == recs[-1].req.tenant
    # once enough requests finished, predictions follow the observed lengths
    assert sim.predictor.quantile(key, recs[-1].req.prompt_tokens, 0.5).level != "default"


def test_every_named_profile_is_a_policy_and_the_default_runs(tmp_path: Path) -> None:
    pols = builtin_policies()
    assert set(PROFILES) <= set(pols)
    assert pols[DEFAULT_PROFILE].gateway_queue  # as a gateway runs it (scheduling on)
    assert not pols["round-robin"].gateway_queue
    trace = tmp_path / "mini.csv"
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens"]
    rows += [f"{i * 0.05:.3f},{200 + (i * 53) % 900},{10 + (i * 17) % 90}" for i in range(60)]
    trace.write_text("\n".join(rows) + "\n")
    res = run_simulation(trace, replicas=2, policies=[DEFAULT_PROFILE], plots=False)
    assert res["policies"][DEFAULT_PROFILE]["points"][0]["completed"] == 60
