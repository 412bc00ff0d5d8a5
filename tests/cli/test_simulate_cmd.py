"""``tokenplane simulate``: the default routing profile runs; unknown names are refused."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tokenplane.cli.main import build_cli
from tokenplane.routing.profiles import DEFAULT_PROFILE


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
