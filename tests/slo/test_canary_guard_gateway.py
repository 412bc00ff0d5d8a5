"""A guarded canary in a running gateway: the canary's replica refuses connections,
the guard trips on the availability SLO, the split goes back to the stable version
(every later request is served by it), the decision is on the admin API with its
evidence and on /metrics, and a page reaches the webhook."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from tests.examples_support import HttpStub
from tests.gateway.harness import GatewayThread, free_port

ALIAS = "chat"


async def _ok(request: web.Request) -> web.StreamResponse:
    return web.Response(status=204)


def _config(hook: str) -> dict[str, Any]:
    return {
        "models": [{
            "alias": ALIAS, "tokenizer": "cl100k_base",
            "backends": [
                {"id": "stable", "type": "sim", "profile": "instant", "model_version": "v1"},
                {"id": "canary", "type": "vllm", "model": "x", "model_version": "v2",
                 "base_url": f"http://127.0.0.1:{free_port()}"},
            ],
        }],
        "routing": {"splits": {ALIAS: {
            "weights": {"v1": 50, "v2": 50},
            "guard": {"slo": "chat-avail", "stable": "v1", "canary": "v2",
                      "min_requests": 5},
        }}},
        "slos": [{"name": "chat-avail", "selector": {"model": ALIAS},
                  "slis": [{"kind": "availability"}], "objective": 0.99, "window": "1d"}],
        "slo_alerting": {"evaluate_every": "1h", "webhooks": [
            {"url": hook, "format": "text"}]},
    }


def test_a_failing_canary_is_rolled_back(tmp_path: Path) -> None:
    stub = HttpStub({"/hook": _ok}).start()
    gw = GatewayThread(_config(f"{stub.url}/hook"), tmp_path).start()
    try:
        admin = gw.create_key("default", admin=True)
        auth = {"authorization": f"Bearer {admin}"}
        body = {"model": ALIAS, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
        with httpx.Client(base_url=gw.base_url, timeout=30) as c:
            codes = [c.post("/chat/completions", json=body, headers=auth).status_code
                     for _ in range(30)]
            failed = sum(1 for code in codes if code >= 500)
            assert failed >= 5 and codes.count(200) >= 5  # both versions got traffic
            deadline = time.monotonic() + 20
            while gw.gateway.meter.stats().as_dict()["flushed"] < 30:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            svc = gw.gateway.slo
            assert svc is not None and svc.guards is not None
            gw.call(svc.refresh())
            assert ALIAS in svc.guards.tripped
            rule = gw.gateway.routing.router.splits[ALIAS]  # type: ignore[union-attr]
            assert tuple(rule.weights) == (("v1", 1.0),)
            # from now on everything goes to the stable version
            after = [c.post("/chat/completions", json=body, headers=auth) for _ in range(10)]
            assert [r.status_code for r in after] == [200] * 10
            slos = c.get(gw.base_url.removesuffix("/v1") + "/admin/v1/slos",
                         headers=auth).json()
            [guard] = slos["canary_guards"]
            assert guard["tripped"] and guard["rolled_back"]
            assert guard["evidence"]["canary"]["bad"] == failed
            assert guard["evidence"]["canary"]["burn_rate"] >= 14.4
            assert "burns its error budget" in guard["evidence"]["reason"]
            metrics = c.get(gw.metrics_url).text
            assert ('tokenplane_canary_rolled_back{alias="chat",canary="v2",stable="v1"} 1.0'
                    in metrics)
        assert stub.wait_seen(3)  # the two burn-rate pages of the SLO, and the rollback
        [page] = [b for b in (json.loads(s.body) for s in stub.seen)
                  if b["status"] == "rolled_back"]
        assert page["text"].startswith("[ROLLED BACK] Canary v2 of chat rolled back to v1")
        assert page["evidence"]["canary"]["valid"] == failed
    finally:
        gw.stop()
        stub.stop()
