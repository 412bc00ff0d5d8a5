"""What the autoscaler decided, visible three ways: ``GET /admin/v1/autoscale`` (admin
keys only), ``tokenplane autoscale status`` (from the data directory or the running
gateway) and the ``tokenplane_autoscale_*`` Prometheus series."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.autoscale.gateway.test_embedded import autoscaled, controller, embedded, wait
from tests.gateway.harness import GatewayThread

ROOT = Path(__file__).resolve().parents[3]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenplane", "autoscale", *args], cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=120)


def _samples(gw: GatewayThread, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = httpx.get(gw.metrics_url, timeout=10).text
    return {tuple(sorted(s.labels.items())): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name == name}


def test_decisions_are_visible(tmp_path: Path) -> None:
    cfg: dict[str, Any] = autoscaled(min_replicas=2, max_replicas=3)
    cfg["observe"]["metrics"]["listen"] = "127.0.0.1:0"
    gw = GatewayThread(cfg, tmp_path / "gw").start()
    try:
        pool = embedded(gw)
        # one replica configured, two the minimum: the first round starts one
        wait(gw, pool, lambda p: p.count("serving") == 2)
        # the status is what a round saw: wait for a round after the second one serves
        ctl = controller(gw)
        gw.call(ctl.wait_rounds(ctl.rounds + 1))
        admin = gw.create_key("default", admin=True)
        tenant = gw.create_key("default")
        url = gw.base_url.removesuffix("/v1") + "/admin/v1/autoscale"

        def get(key: str | None, **params: str) -> httpx.Response:
            headers = {"authorization": f"Bearer {key}"} if key else {}
            return httpx.get(url, headers=headers, params=params, timeout=10)

        body = get(admin).json()
        assert body["enabled"] is True and body["leading"] is True
        [chat] = body["pools"]
        assert (chat["pool"], chat["policy"], chat["actuator"]) == (
            "chat", "tokenplane", "embedded")
        assert chat["desired_serving"] == 2 and chat["replicas"]["serving"] == 2
        assert "prompt_tokens_per_s" in chat["demand"]
        first = body["decisions"][0]
        assert (first["serving_from"], first["serving_to"], first["direction"]) == (1, 2, "up")
        assert "min" in first["reasons"] and "need_now" in first["inputs"]
        assert get(admin, pool="chat", limit="1").json()["decisions"] == [first]
        # tenant keys, no key, and bad parameters: OpenAI's envelope, never a 5xx
        for resp, status, code in ((get(tenant), 403, "admin_required"),
                                   (get(None), 401, "missing_api_key"),
                                   (get(admin, pool="nope"), 404, "not_found"),
                                   (get(admin, limit="x"), 400, "invalid_request")):
            assert resp.status_code == status, resp.text
            assert resp.json()["error"]["code"] == code

        actual = _samples(gw, "tokenplane_autoscale_actual_replicas")
        assert actual[(("pool", "chat"),)] == 2
        assert _samples(gw, "tokenplane_autoscale_desired_replicas")[(("pool", "chat"),)] == 2
        assert _samples(gw, "tokenplane_autoscale_warm_replicas")[(("pool", "chat"),)] == 0
        decisions = _samples(gw, "tokenplane_autoscale_decisions_total")
        assert decisions == {(("direction", "up"), ("pool", "chat"),
                              ("reason", first["reasons"][0])): 1.0}

        live = _cli("status", "--url", gw.base_url.removesuffix("/v1"), "--format", "json",
                    env={"TOKENPLANE_ADMIN_KEY": admin})
        assert live.returncode == 0, live.stderr
        assert json.loads(live.stdout)["pools"][0]["desired_serving"] == 2
        refused = _cli("status", "--url", gw.base_url.removesuffix("/v1"),
                       env={"TOKENPLANE_ADMIN_KEY": tenant})
        assert refused.returncode == 1 and "403" in refused.stderr
    finally:
        gw.stop()
    # the data directory keeps the decisions and the last round's pools
    out = _cli("status", "--home", str(gw.home), "--format", "json")
    assert out.returncode == 0, out.stderr
    saved = json.loads(out.stdout)
    assert saved["pools"][0]["pool"] == "chat"
    assert [(d["serving_from"], d["serving_to"]) for d in saved["decisions"]] == [(1, 2)]
    table = _cli("status", "--home", str(gw.home))
    assert table.returncode == 0
    assert "chat" in table.stdout and "1->2" in table.stdout and "tokenplane" in table.stdout
    missing = _cli("status", "--home", str(tmp_path / "elsewhere"))
    assert missing.returncode == 1 and "no autoscaler data" in missing.stderr


def test_off_says_so(tmp_path: Path) -> None:
    cfg = autoscaled()
    del cfg["autoscale"]
    gw = GatewayThread(cfg, tmp_path / "gw").start()
    try:
        admin = gw.create_key("default", admin=True)
        resp = httpx.get(gw.base_url.removesuffix("/v1") + "/admin/v1/autoscale",
                         headers={"authorization": f"Bearer {admin}"}, timeout=10)
        assert resp.status_code == 200
        assert resp.json() == {"object": "autoscale", "enabled": False, "pools": [],
                               "decisions": []}
        assert gw.gateway.autoscale is None
    finally:
        gw.stop()
