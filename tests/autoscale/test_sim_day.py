"""The autoscaled simulator: cold starts, warm promotion and drains in virtual time,
and a short simulated day through every policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenplane.autoscale.model import PoolSnapshot, ScaleDecision
from tokenplane.engine.profiles import get_profile
from tokenplane.scheduling.slo import default_slo_classes
from tokenplane.sim.autoscale_run import AUTOSCALE_POLICIES, DayConfig, run_day
from tokenplane.sim.cluster import ClusterConfig, PolicySpec
from tokenplane.sim.dynamic import AutoscaledCluster, run_autoscaled
from tokenplane.sim.workload import SimRequest

TRACE = Path("/work/shared/traces/azure_llm_2023_conv.csv")


class Schedule:
    """A policy that asks for a scripted pool: [(from time, serving, warm)]."""

    name = "schedule"

    def __init__(self, steps: list[tuple[float, int, int]]) -> None:
        self.steps = steps

    def decide(self, snap: PoolSnapshot, now: float) -> ScaleDecision:
        serving, warm = next((s, w) for t, s, w in reversed(self.steps) if now >= t)
        return ScaleDecision(snap.pool, now, snap.serving_count, serving, snap.warm_count,
                             warm, ("scripted",))


def requests(n: int, every: float, start: float = 0.0) -> list[SimRequest]:
    return [SimRequest(f"r{i}", start + i * every, 200, 50, (), "t0", "interactive")
            for i in range(n)]


def cluster(policy: Schedule, end_s: float, promote_s: float = 5.0) -> AutoscaledCluster:
    prof = get_profile("llama3-8b-a100")
    return AutoscaledCluster(PolicySpec("lr", "least-requests", False), prof,
                             default_slo_classes(), ClusterConfig(replicas=4, fast_decode=True),
                             policy, initial=1, interval_s=10.0, end_s=end_s,
                             promote_s=promote_s)


def test_cold_start_delays_a_new_replica_and_a_drain_finishes_in_flight_work() -> None:
    sim = cluster(Schedule([(0.0, 1, 0), (100.0, 3, 0), (400.0, 1, 0)]), end_s=600.0)
    assert sim.cold_start_s == 120.0  # the profile's
    run_autoscaled(sim, requests(600, 1.0), 600.0)
    # two cold starts ordered at 100 s, serving from 220 s
    assert sim.log.cold_starts == [(100.0, 220.0), (100.0, 220.0)]
    used = {rec.endpoint for rec in sim.records.values() if rec.req.arrival < 220.0}
    assert used == {0}
    later = {rec.endpoint for rec in sim.records.values() if 230.0 < rec.req.arrival < 400.0}
    assert len(later) == 3
    # scaled back to one at 400 s: the drained ones take nothing new, lose nothing
    after = {rec.endpoint for rec in sim.records.values() if rec.req.arrival > 401.0}
    assert len(after) == 1
    assert all(r.done and not r.shed for r in sim.records.values())
    # replica-seconds: 1 replica for 600 s plus two from 100 to ~400 s (and a drain)
    busy = sum(sim.log.replica_s[p] for p in ("serving", "starting", "draining"))
    assert 600 + 2 * 300 <= busy <= 600 + 2 * 320


def test_warm_replicas_serve_seconds_after_promotion() -> None:
    sim = cluster(Schedule([(0.0, 1, 2), (200.0, 3, 0)]), end_s=400.0, promote_s=5.0)
    run_autoscaled(sim, requests(400, 1.0), 400.0)
    # two warm replicas cold-start at 0, are promoted at 200 s and serve from 205 s
    assert sim.log.promotions == 2
    assert sim.log.cold_starts == []  # cold starts towards the warm pool are not counted
    served = {rec.endpoint for rec in sim.records.values() if rec.req.arrival >= 206.0}
    assert len(served) == 3
    assert sim.log.replica_s["warm"] == pytest.approx(2 * (200.0 - 120.0), abs=1.0)


def test_a_prompt_alone_takes_its_prefill_bound_to_its_first_token() -> None:
    """The day counts a first-token miss as a wait on a cold start only when the
    prompt could have met its target on an idle replica: the bound it uses is what
    the engine takes, a little under it (the later chunks' context reads)."""
    sim = cluster(Schedule([(0.0, 1, 0)]), end_s=60.0)
    prof = get_profile("llama3-8b-a100")
    reqs = [SimRequest(f"p{n}", 10.0 * i, n, 4, (), "t0", "interactive")
            for i, n in enumerate((1000, 8192, 14050))]
    run_autoscaled(sim, reqs, 60.0)
    for rec in sim.records.values():
        n = rec.req.prompt_tokens
        bound = prof.prefill_alone_s(n)
        assert bound * (1 - 1e-9) <= rec.ttft <= bound * 1.1, (n, rec.ttft, bound)
    # the longest prompt misses the interactive 1 s target on any pool
    long = next(r for r in sim.records.values() if r.req.prompt_tokens == 14050)
    assert long.slo.ttft_s is not None and prof.prefill_alone_s(14050) > long.slo.ttft_s


@pytest.mark.skipif(not TRACE.exists(), reason="shared traces not present")
def test_a_short_day_through_every_policy(tmp_path: Path) -> None:
    cfg = DayConfig(rate_scale=40.0, day_hours=1.0)
    res = run_day(TRACE, AUTOSCALE_POLICIES, tmp_path, cfg)
    pols = res["policies"]
    assert set(pols) == set(AUTOSCALE_POLICIES)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert set(on_disk["policies"]) == set(AUTOSCALE_POLICIES)
    assert (tmp_path / "autoscale_replicas.png").stat().st_size > 0
    assert (tmp_path / "autoscale_attainment.png").stat().st_size > 0
    peak = pols["static-peak"]
    # replica-hours in day hours: 8 replicas x 24 h (plus the last requests' tail)
    assert 190.0 <= peak["replica_hours_serving"] <= 200.0
    assert peak["scale_events"] == 0
    tp = pols["tokenplane"]
    assert tp["scale_ups"] >= 1 and tp["scale_downs"] >= 1
    assert tp["replica_hours_serving"] < peak["replica_hours_serving"]
    assert tp["forecast"]["mape"] is not None
    for p in pols.values():
        assert 0.0 <= p["interactive_attainment"] <= 1.0
        assert len(p["series"]["serving"]) == 60


def _mini_trace(tmp_path: Path) -> Path:
    trace = tmp_path / "mini.csv"
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens"]
    rows += [f"{i * 0.05:.3f},{200 + (i * 53) % 900},{10 + (i * 17) % 90}" for i in range(40)]
    trace.write_text("\n".join(rows) + "\n")
    return trace


def test_the_cli_runs_a_compressed_day_and_refuses_unknown_names(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tokenplane.cli.main import build_cli

    out = tmp_path / "out"
    args = ["simulate", "--trace", str(_mini_trace(tmp_path)), "--out", str(out),
            "--shape", "diurnal", "--day-hours", "0.5", "--rate-scale", "200", "--no-plots"]
    result = CliRunner().invoke(build_cli(), [*args, "--autoscale", "tokenplane,static-mean"])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert list(data["policies"]) == ["tokenplane", "static-mean"]
    assert data["config"]["rate_scale"] == 200.0 and data["config"]["day_hours"] == 0.5
    bad = CliRunner().invoke(build_cli(), [*args, "--autoscale", "nope"])
    assert bad.exit_code == 2
    assert "unknown autoscaling policy 'nope'" in bad.output and "hpa-kv" in bad.output
    shape = CliRunner().invoke(build_cli(), [*args[:-5], "--shape", "flat", "--autoscale",
                                             "tokenplane"])
    assert shape.exit_code == 2 and "diurnal" in shape.output
