"""Capacity planning (issue 15): ``tokenplane plan`` finds, per hour of the day, the
least replicas that meet the SLOs. Replaying each hour on the planned replicas meets
the target; one fewer at the peak hour does not. Scenarios, the ledger as the source,
and bad input."""

from __future__ import annotations

import csv
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import openai
import pytest
from typer.testing import CliRunner

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.cli.main import build_cli
from tokenplane.engine.profiles import get_profile
from tokenplane.routing.profiles import DEFAULT_PROFILE
from tokenplane.scheduling.slo import default_slo_classes
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, builtin_policies
from tokenplane.sim.plan import (
    Scenario,
    Target,
    hour_buckets,
    parse_what_if,
    plan_scenario,
    scenario_workload,
)
from tokenplane.sim.slo_results import slo_results
from tokenplane.sim.traces import load_trace, scale_load, slice_trace
from tokenplane.sim.workload import SimRequest, WorkloadRules, assign
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules

AZURE = Path("/work/shared/traces/azure_llm_2023_conv.csv")  # ../shared, as tests/sim/test_traces
WINDOW = 30 * 86400.0
TARGET = Target((Slo("interactive-ttft", Selector(slo_class="interactive"),
                     (Sli(SliKind.TTFT, 1.0),), 0.99, WINDOW, default_rules(WINDOW, 0.99)),),
                default_slo_classes())


def _two_hours() -> list[SimRequest]:
    """Hour 0: two minutes of the Azure conversation trace at its own rate; hour 1: the
    same two minutes at 6x the rate (the peak)."""
    base = slice_trace(load_trace(AZURE), 0.0, 120.0)
    quiet = assign(base, WorkloadRules(batch_fraction=0.0, seed=0))
    busy = assign(scale_load(base, 6.0), WorkloadRules(batch_fraction=0.0, seed=1))
    busy = [replace(r, request_id="p" + r.request_id, arrival=r.arrival + 3600.0)
            for r in busy]
    return quiet + busy


def _met(reqs: list[SimRequest], replicas: int) -> bool:
    """An independent replay of one hour: a fresh cluster of ``replicas``, judged on the
    target's SLOs."""
    sim = ClusterSim(builtin_policies()[DEFAULT_PROFILE], get_profile("llama3-8b-a100"),
                     TARGET.classes, ClusterConfig(replicas=replicas))
    sim.run(reqs)
    res = slo_results(TARGET.slos, list(sim.records.values()), TARGET.alias)
    return all(v["met"] for per in res.values() for v in per.values())


@pytest.fixture(scope="module")
def planned() -> tuple[dict[int, list[SimRequest]], dict[str, Any]]:
    buckets = hour_buckets(_two_hours(), epoch=False)
    sc = Scenario("base", get_profile("llama3-8b-a100"))
    from decimal import Decimal

    plan = plan_scenario(buckets, sc, TARGET, headroom=0.25,
                         price_per_replica_hour=Decimal("2.50"))
    return buckets, plan


def test_the_planned_replicas_meet_the_target_and_one_fewer_at_the_peak_does_not(
    planned: tuple[dict[int, list[SimRequest]], dict[str, Any]],
) -> None:
    buckets, plan = planned
    hours = {h["hour"]: h for h in plan["hours"]}
    assert set(hours) == {0, 1}
    assert plan["peak"]["hour"] == 1
    assert hours[1]["needed"] > hours[0]["needed"] >= 1
    for hour, reqs in buckets.items():
        assert _met(reqs, hours[hour]["needed"]), hour
    peak = plan["peak"]
    assert not _met(buckets[1], peak["needed"] - 1)


def test_headroom_cost_and_the_probes_on_record(
    planned: tuple[dict[int, list[SimRequest]], dict[str, Any]],
) -> None:
    _, plan = planned
    for h in plan["hours"]:
        assert h["recommended"] == -(-h["needed"] * 5 // 4)  # ceil(needed * 1.25)
        probes = {p["replicas"]: p["met"] for p in h["probes"]}
        assert probes[h["needed"]] is True
        if h["needed"] > 1:
            assert probes[h["needed"] - 1] is False
    observed = sum(h["recommended"] for h in plan["hours"])
    assert plan["replica_hours_observed"] == observed
    # two hours of the day observed: the day's other 22 priced at their average
    day = observed * 24 / 2
    assert plan["replica_hours_per_day"] == day
    assert plan["cost_per_month"] == f"{day * 2.5 * 30.4375:.2f}"
    assert plan["hours_observed"] == [0, 1]
    assert plan["cost_basis"] == "2 of 24 hours observed (00, 01); the other 22 priced at " \
        "their average"


def test_hour_buckets_keep_each_hours_busiest_day() -> None:
    one = SimRequest("a", 10.0, 100, 10, (), "t", "interactive")
    day1 = [replace(one, request_id=f"d1-{i}", arrival=9 * 3600 + i) for i in range(3)]
    day2 = [replace(one, request_id=f"d2-{i}", arrival=86400 + 9 * 3600 + i)
            for i in range(5)]
    buckets = hour_buckets(day1 + day2, epoch=True)
    assert list(buckets) == [9]
    assert [r.request_id for r in buckets[9]] == [f"d2-{i}" for i in range(5)]
    assert [r.arrival for r in buckets[9]] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_what_if_scenarios() -> None:
    base = Scenario("base", get_profile("llama3-8b-a100"))
    h100 = parse_what_if("h100:profile=llama3-8b-h100,growth=1.5", base, get_profile)
    assert (h100.name, h100.profile.name, h100.growth) == ("h100", "llama3-8b-h100", 1.5)
    off = parse_what_if("prefix_cache=off", base, get_profile)
    assert off.name == "prefix_cache=off" and not off.prefix_cache
    req = SimRequest("a", 30.0, 100, 10, (1, 2), "t", "interactive")
    assert scenario_workload([req], off) == [replace(req, block_hashes=())]
    assert scenario_workload([req], replace(base, growth=2.0))[0].arrival == 15.0
    for bad in ("growth=0", "growth=x", "colour=red", "prefix_cache=maybe", "profile"):
        with pytest.raises(ValueError):
            parse_what_if(bad, base, get_profile)
    with pytest.raises(KeyError):
        parse_what_if("profile=tpu-v9", base, get_profile)


def _write_trace(path: Path, reqs: list[SimRequest]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arrived_at", "num_prefill_tokens", "num_decode_tokens"])
        for r in sorted(reqs, key=lambda r: r.arrival):
            w.writerow([r.arrival, r.prompt_tokens, r.output_tokens])


def test_the_command_writes_the_plan_and_its_scenarios(tmp_path: Path) -> None:
    trace = tmp_path / "two_hours.csv"
    _write_trace(trace, _two_hours())
    out = tmp_path / "plan"
    result = CliRunner().invoke(build_cli(), [
        "plan", "--trace", str(trace), "--out", str(out), "--start-hour", "8",
        "--price-per-replica-hour", "3", "--headroom", "0",
        "--what-if", "h100:profile=llama3-8b-h100"])
    assert result.exit_code == 0, result.output
    plan = json.loads((out / "plan.json").read_text())
    base, h100 = plan["scenarios"]["base"], plan["scenarios"]["h100"]
    assert [h["hour"] for h in base["hours"]] == [8, 9]
    assert base["peak"]["hour"] == 9
    assert h100["peak"]["recommended"] < base["peak"]["recommended"]
    assert (out / "plan.png").stat().st_size > 10_000
    assert "peak" in (out / "plan.txt").read_text()


def test_a_diurnal_day_from_a_one_hour_trace(tmp_path: Path) -> None:
    """``--shape diurnal`` spreads the trace over the documented day; the planned hours
    follow the curve (the 11:00 peak needs more than the 04:00 trough)."""
    out = tmp_path / "day"
    result = CliRunner().invoke(build_cli(), [
        "plan", "--trace", str(AZURE), "--shape", "diurnal", "--peak-rps", "1.5",
        "--hours", "4,11", "--out", str(out), "--headroom", "0"])
    assert result.exit_code == 0, result.output
    hours = {h["hour"]: h for h in
             json.loads((out / "plan.json").read_text())["scenarios"]["base"]["hours"]}
    assert set(hours) == {4, 11}
    assert hours[11]["requests"] > 4 * hours[4]["requests"]  # 6x the trough's rate
    assert hours[11]["tokens_per_s"] > hours[4]["tokens_per_s"]


@pytest.mark.parametrize("args, hint", [
    (["--trace", "t.csv", "--from-ledger"], "--trace"),
    ([], "--trace"),
    (["--trace", "t.csv", "--what-if", "colour=red"], "--what-if"),
    (["--trace", "t.csv", "--price-per-replica-hour", "-1"], "--price-per-replica-hour"),
    (["--trace", "t.csv", "--price-per-replica-hour", "cheap"], "--price-per-replica-hour"),
    (["--trace", "t.csv", "--start-hour", "24"], "--start-hour"),
    (["--trace", "t.csv", "--shape", "weekly"], "--shape"),
    (["--from-ledger", "--shape", "diurnal"], "--shape"),
    (["--trace", "t.csv", "--hours", "9-3"], "--hours"),
    (["--trace", "t.csv", "--hours", "25"], "--hours"),
    (["--trace", "t.csv", "--what-if", "a:growth=2", "--what-if", "a:growth=3"],
     "--what-if"),
])
def test_bad_input_is_refused(tmp_path: Path, args: list[str], hint: str) -> None:
    result = CliRunner().invoke(build_cli(), ["plan", "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2
    assert hint in result.output


def test_from_the_ledger(tmp_path: Path) -> None:
    """Requests served through a real gateway plan from its ledger, in the UTC hour they
    arrived."""
    cfg = sim_config(replicas=1, profile="instant")
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        client = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("acme"),
                               max_retries=0)
        for i in range(6):
            client.chat.completions.create(
                model="sim-llama3-8b", max_tokens=8,
                messages=[{"role": "user", "content": f"Question {i}?"}])
        client.close()
    finally:
        gw.stop()
    hour = int(time.time() // 3600) % 24
    out = tmp_path / "plan"
    result = CliRunner().invoke(build_cli(), [
        "plan", "--from-ledger", "--since", "1h", "--home", str(tmp_path),
        "--out", str(out)])
    assert result.exit_code == 0, result.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["requests"] == 6
    hours = plan["scenarios"]["base"]["hours"]
    assert [h["requests"] for h in hours] == [6]
    assert hours[0]["hour"] in (hour, (hour - 1) % 24)  # the test may cross an hour
    assert hours[0]["needed"] == 1


def test_a_one_hour_trace_is_priced_for_the_whole_month(tmp_path: Path) -> None:
    """Issue 31: a trace of one hour is one hour of 24: $/mo prices the whole day at
    that hour's replicas (not one hour a day, 24 times too low), and says which hours
    were observed."""
    trace = tmp_path / "one_hour.csv"
    _write_trace(trace, [r for r in _two_hours() if r.arrival < 3600.0])
    out = tmp_path / "plan"
    result = CliRunner().invoke(build_cli(), [
        "plan", "--trace", str(trace), "--out", str(out), "--start-hour", "8",
        "--price-per-replica-hour", "2.5", "--headroom", "0"])
    assert result.exit_code == 0, result.output
    base = json.loads((out / "plan.json").read_text())["scenarios"]["base"]
    [hour] = base["hours"]
    replicas = hour["recommended"]
    assert base["hours_observed"] == [8]
    assert base["cost_per_month"] == f"{replicas * 24 * 2.5 * 30.4375:.2f}"
    assert base["cost_per_month_static_at_peak"] == base["cost_per_month"]
    text = (out / "plan.txt").read_text()
    assert f"$/mo  {replicas * 24 * 2.5 * 30.4375:>18.2f}" in text
    assert "1 of 24 hours observed (08); the other 23 priced at their average" in text
