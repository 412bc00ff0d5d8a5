"""deploy/prometheus/tokenplane-ops-rules.yaml: valid for ``promtool check rules``,
every alert with a runbook section in docs/OPERATIONS.md, and every ``tokenplane_``
series it reads exported by a running gateway (scraped from its metrics listener)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import httpx
import openai
import yaml

from tests.deploy.schema_check import ROOT
from tests.gateway.harness import GatewayThread, sim_config
from tests.services import require

RULES = ROOT / "deploy/prometheus/tokenplane-ops-rules.yaml"
SERIES = re.compile(r"\btokenplane_[a-z_]+\b")


def _alerts() -> list[dict[str, object]]:
    data = yaml.safe_load(RULES.read_text())
    return [r for g in data["groups"] for r in g["rules"] if "alert" in r]


def test_promtool_accepts_the_rules() -> None:
    path = shutil.which("promtool")
    require("promtool (Debian's prometheus package)", path is not None, "PATH")
    assert path is not None
    out = subprocess.run([path, "check", "rules", str(RULES)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_has_a_runbook() -> None:
    guide = (ROOT / "docs/OPERATIONS.md").read_text()
    for alert in _alerts():
        name = str(alert["alert"])
        assert f"### {name}" in guide, name
        annotations = alert["annotations"]
        assert isinstance(annotations, dict)
        assert annotations["runbook"] == f"docs/OPERATIONS.md#{name.lower()}"


def test_the_series_are_exported(tmp_path: Path) -> None:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["observe"] = {"metrics": {"listen": "127.0.0.1:0"}}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        key = gw.create_key("default")
        with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as client:
            client.chat.completions.create(model="sim-llama3-8b", max_tokens=4,
                                           messages=[{"role": "user", "content": "hi"}])
        text = httpx.get(gw.metrics_url, timeout=30).text
    finally:
        gw.stop()
    exported = {m.group(0) for m in SERIES.finditer(text)}
    used = {m.group(0) for a in _alerts() for m in SERIES.finditer(str(a["expr"]))}
    assert used and used <= exported, sorted(used - exported)
