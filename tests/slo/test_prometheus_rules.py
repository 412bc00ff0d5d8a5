"""``tokenplane slo rules``: the rules pass ``promtool check rules``, and ``promtool
test rules`` shows them firing exactly the alerts the gateway's own evaluator fires
for the same traffic (two workers' counters, summed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.services import require
from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules
from tokenplane.slo.verdict import RequestFacts

ROOT = Path(__file__).resolve().parents[2]
SLO_CONFIG = {
    "models": [{"alias": "chat", "backends": [{"type": "sim"}]}],
    "slos": [{"name": "api", "slis": [{"kind": "availability"}], "objective": 0.99,
              "window": "30d"}],
}


def promtool() -> str:
    path = shutil.which("promtool")
    require("promtool (Debian's prometheus package)", path is not None, "PATH")
    assert path is not None
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenplane", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_rules_for_the_example_pass_promtool(tmp_path: Path) -> None:
    tool = promtool()
    out = tmp_path / "rules.yaml"
    made = cli("slo", "rules", "--config", str(ROOT / "examples" / "slos.yaml"),
               "--out", str(out))
    assert made.returncode == 0, made.stderr
    checked = subprocess.run([tool, "check", "rules", str(out)], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def _evaluator_firing(minutes: int, good: int, bad: int) -> set[tuple[str, str, str]]:
    """What the gateway's evaluator fires after ``minutes`` of traffic at these rates
    per minute (two workers' worth)."""
    slo = Slo("api", Selector(), (Sli(SliKind.AVAILABILITY),), 0.99, 30 * 86400.0,
              default_rules(30 * 86400.0, 0.99))
    ev = SloEvaluator([slo])
    start = 1_700_000_040.0
    for m in range(minutes):
        for i in range(good + bad):
            ev.observe(RequestFacts(
                ts=start + m * 60 + i * 60 / (good + bad), model="chat", tenant="t",
                department="", app="", slo_class="", status="ok" if i >= bad else "error",
                http_status=200 if i >= bad else 502, error_code=None, stream=False,
                ttft_s=None, tpot_s=None, latency_s=1.0))
    [row] = ev.status(start + minutes * 60 - 1)
    return {(str(a["severity"]), str(a["long_window"]), str(a["short_window"]))
            for a in row.as_dict()["alerts"]}  # type: ignore[union-attr]


def test_promtool_fires_what_the_evaluator_fires(tmp_path: Path) -> None:
    tool = promtool()
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(yaml.safe_dump(SLO_CONFIG), encoding="utf-8")
    rules = tmp_path / "rules.yaml"
    assert cli("slo", "rules", "--config", str(cfg), "--out", str(rules)).returncode == 0
    # 10% of requests fail: burn 10 against a 1% budget, so the 6x page and the 1x
    # ticket fire and the 14.4x page does not
    expected = _evaluator_firing(40, good=90, bad=10)
    assert expected == {("page", "6h", "30m"), ("ticket", "3d", "6h")}
    by_window = {(a["labels"]["long_window"], a["labels"]["short_window"]): a
                 for a in yaml.safe_load(rules.read_text())["groups"][1]["rules"]}
    exp_alerts: list[dict[str, Any]] = []
    for severity, long_w, short_w in sorted(expected):
        rule = by_window[(long_w, short_w)]
        assert rule["labels"]["severity"] == severity
        exp_alerts.append({"exp_labels": rule["labels"],
                           "exp_annotations": rule["annotations"]})
    series = []
    for worker in ("w0", "w1"):  # each worker counts its own; the rules sum them
        for verdict, per_min in (("good", 45), ("bad", 5)):
            series.append({
                "series": f'tokenplane_slo_events_total{{slo="api", sli="availability", '
                          f'verdict="{verdict}", worker="{worker}"}}',
                "values": f"0+{per_min}x60",
            })
    test = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [{"eval_time": "40m", "alertname": "TokenplaneSLOBurnRate",
                                 "exp_alerts": exp_alerts}],
        }],
    }
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump(test, sort_keys=False), encoding="utf-8")
    ran = subprocess.run([tool, "test", "rules", str(test_file)], capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stdout + ran.stderr
