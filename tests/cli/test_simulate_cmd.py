"""``tokenplane simulate``: the default routing profile runs; unknown names are refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from tokenplane.cli.main import build_cli
from tokenplane.routing.profiles import DEFAULT_PROFILE
from tokenplane.sim.metrics import goodput, passes
from tokenplane.sim.runner import goodput_bound


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "mini.csv"
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens"]
    rows += [f"{i * 0.05:.3f},{200 + (i * 53) % 900},{10 + (i * 17) % 90}" for i in range(40)]
    trace.write_text("\n".join(rows) + "\n")
    return trace


def test_the_default_profile_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(build_cli(), [
        "simulate", "--trace", str(_trace(tmp_path)), "--out", str(out), "--replicas", "2",
        "--policies", DEFAULT_PROFILE, "--no-plots",
    ])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert list(data["policies"]) == [DEFAULT_PROFILE]


def test_unknown_policy_lists_the_valid_names(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_cli(), [
        "simulate", "--trace", str(_trace(tmp_path)), "--out", str(tmp_path / "o"),
        "--policies", "nope",
    ])
    assert result.exit_code == 2
    assert "unknown policy 'nope'" in result.output
    assert DEFAULT_PROFILE in result.output and "round-robin" in result.output


SLO_CONFIG = """
models:
  - alias: chat
    backends: [{type: sim}]
scheduling:
  classes:
    interactive: {priority: 0, ttft_s: 2.0, tpot_s: 0.2}
    batch: {priority: 1, deadline_s: 600, sheddable: true, gate_fraction: 0.5}
slos:
  - name: chat-ttft
    selector: {model: chat, slo_class: interactive}
    slis: [{kind: ttft, threshold: 2s}, {kind: availability}]
    objective: 0.9
"""


def _busy_trace(tmp_path: Path) -> Path:
    """300 requests of 1,000-2,000 prompt and 100-300 output tokens, ten a second:
    one replica saturates near this rate."""
    trace = tmp_path / "busy.csv"
    rows = ["arrived_at,num_prefill_tokens,num_decode_tokens"]
    rows += [f"{i * 0.1:.3f},{1000 + (i * 53) % 1000},{100 + (i * 17) % 200}"
             for i in range(300)]
    trace.write_text("\n".join(rows) + "\n")
    return trace


def _run(tmp_path: Path, *extra: str) -> dict[str, object]:
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(SLO_CONFIG)
    out = tmp_path / "out"
    result = CliRunner().invoke(build_cli(), [
        "simulate", "--trace", str(_busy_trace(tmp_path)), "--out", str(out), "--replicas", "1",
        "--policies", DEFAULT_PROFILE, "--no-plots", "--config", str(cfg), *extra,
    ])
    assert result.exit_code == 0, result.output
    data: dict[str, object] = json.loads((out / "results.json").read_text())
    data["output"] = result.output
    return data


def test_slos_from_a_config_are_judged_at_every_point(tmp_path: Path) -> None:
    data = _run(tmp_path, "--load", "1.0")
    assert data["slos"] == ["chat-ttft"]
    assert data["slo_classes"]["interactive"]["ttft_s"] == 2.0  # type: ignore[index]
    [point] = data["policies"][DEFAULT_PROFILE]["points"]  # type: ignore[index]
    slo = point["slos"]["chat-ttft"]
    interactive = point["per_class"]["interactive"]["requests"]
    assert slo["availability"]["valid"] == interactive  # what the selector selects
    assert slo["ttft"]["valid"] + slo["availability"]["bad"] == interactive
    assert 0 <= slo["ttft"]["sli"] <= 1


def test_one_load_that_passes_says_the_goodput_is_capped(tmp_path: Path) -> None:
    data = _run(tmp_path, "--load", "0.2")
    res = data["policies"][DEFAULT_PROFILE]  # type: ignore[index]
    assert res["goodput"]["bound"] == "capped" and res["goodput"]["load_fail"] is None
    assert "at least: every load tried passed" in str(data["output"])


def test_bisect_finds_the_knee_beyond_the_loads_tried(tmp_path: Path) -> None:
    data = _run(tmp_path, "--load", "0.2", "--bisect", "--precision", "0.1")
    res = data["policies"][DEFAULT_PROFILE]  # type: ignore[index]
    g = res["goodput"]
    assert g["bound"] == "bracketed" and g["load_pass"] > 0.2
    assert g["rel_precision"] <= 0.1 and g["probes"] >= 2
    loads = [p["load"] for p in res["points"]]
    assert loads == sorted(loads) and len(loads) == 1 + g["probes"]
    passed = {p["load"]: p["slo_attainment"] >= 0.9 for p in res["points"]}
    assert passed[g["load_pass"]] and not passed[g["load_fail"]]
    assert res["goodput_rps"] > 0


def test_attainments_are_readable_and_every_load_says_if_it_passed(tmp_path: Path) -> None:
    """Issue 31: attainments in at most 4 significant digits (not 16), each load marked
    passed or failed, and a goodput never from a load that failed."""
    data = _run(tmp_path, "--load", "0.2,3")
    out = str(data["output"])
    assert not re.search(r"\d\.\d{5,}", out), out
    res = data["policies"][DEFAULT_PROFILE]  # type: ignore[index]
    lines = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("load ")]
    assert len(lines) == 2
    for ln, point in zip(lines, res["points"], strict=True):
        att = float(point["slo_attainment"])
        assert f"attainment {att:.4g}, " in ln
        assert ("passed" in ln) == passes(point)
    if not passes(res["points"][-1]):  # the heavy load failed: not the goodput
        assert res["goodput"]["load_pass"] != 3.0


def test_a_load_that_misses_a_configured_slo_is_no_goodput() -> None:
    ok = {"load": 1.0, "rate_rps": 10.0, "slo_attainment": 0.95,
          "slos": {"chat": {"ttft": {"met": True}}}}
    missed = {"load": 2.0, "rate_rps": 20.0, "slo_attainment": 0.95,
              "slos": {"chat": {"ttft": {"met": False}}}}
    assert passes(ok) and not passes(missed)
    assert goodput([ok, missed]) == 10.0
    bound = goodput_bound([ok, missed], None)
    assert (bound["bound"], bound["load_pass"], bound["load_fail"]) == ("bracketed", 1.0, 2.0)
    assert goodput([missed]) == 0.0 and goodput_bound([missed], None)["bound"] == "below"
