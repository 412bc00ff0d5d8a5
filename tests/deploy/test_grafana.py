"""The Grafana dashboard (deploy/grafana/tokenplane.json, issue 17): it is what its
script writes; every series it queries exists in a live gateway's /metrics; every
expression parses (promtool, with Grafana's variables filled in); the panels are
well formed."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import openai
import pytest
import yaml

from tests.gateway.harness import GatewayThread, sim_config
from tests.slo.test_prometheus_rules import promtool

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_dashboard",
                                                  GRAFANA / "build_dashboard.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GRAFANA / "tokenplane.json").read_text())
    return loaded


def _exprs(dash: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def _names(expr: str) -> set[str]:
    return set(re.findall(r"\btokenplane_[a-z0-9_]+", expr))


def test_the_file_is_what_the_script_writes() -> None:
    assert (GRAFANA / "tokenplane.json").read_text() == _script().render()


def test_panels_are_well_formed() -> None:
    dash = _dashboard()
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    charts = [p for p in dash["panels"] if p["type"] != "row"]
    assert len(charts) >= 15
    for p in charts:
        assert p["targets"] and p["datasource"]["uid"] == "${datasource}"
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert variables == {"datasource", "tenant", "model"}


def test_every_expression_parses(tmp_path: Path) -> None:
    tool = promtool()
    rules = []
    for i, expr in enumerate(_exprs(_dashboard())):
        filled = (expr.replace("$__rate_interval", "5m").replace("$tenant", ".*")
                  .replace("$model", ".*"))
        rules.append({"record": f"tokenplane:dashboard_check_{i}", "expr": filled})
    path = tmp_path / "dashboard_rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run([tool, "check", "rules", str(path)], capture_output=True,
                             text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The series names a gateway with SLOs, the gateway queue and a limit exposes
    after real requests (one refused)."""
    cfg = sim_config(replicas=1, profile="instant")
    cfg["slos"] = [{"name": "chat", "selector": {"model": "sim-llama3-8b"},
                    "slis": [{"kind": "availability"}], "objective": 0.99, "window": "1d"}]
    gw = GatewayThread(cfg, tmp_path_factory.mktemp("grafana")).start()
    try:
        client = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("acme"),
                               max_retries=0)
        client.chat.completions.create(model="sim-llama3-8b", max_tokens=4,
                                       messages=[{"role": "user", "content": "hi"}])
        client.close()
        text = httpx.get(gw.metrics_url, timeout=30).text
    finally:
        gw.stop()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines()
            if line.startswith("tokenplane_")}


def _missing(exprs: list[str], scraped: set[str]) -> list[str]:
    return sorted(n for e in exprs for n in _names(e) if n not in scraped)


def test_every_series_the_dashboard_queries_exists(scraped: set[str]) -> None:
    exprs = _exprs(_dashboard())
    assert len(set().union(*(_names(e) for e in exprs))) >= 12
    missing = _missing(exprs, scraped)
    assert not missing, f"not in a live gateway's /metrics: {missing}"
    label_sources = {v["definition"].split("(")[1].split(",")[0]
                     for v in _dashboard()["templating"]["list"] if "definition" in v}
    assert label_sources <= scraped


def test_a_misspelt_series_would_be_caught(scraped: set[str]) -> None:
    """The check above is not vacuous: a name the gateway does not export fails it."""
    planted = [*_exprs(_dashboard()), "sum(rate(tokenplane_tokens_totl[5m]))"]
    assert _missing(planted, scraped) == ["tokenplane_tokens_totl"]
