"""SLO alerts reach webhooks: firing, then resolved; a post that gets a 500 is
retried; two gateway replicas sharing PostgreSQL send one notification per alert
(one leads, by an advisory lock); Alertmanager's webhook JSON and a plain text body."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web

from tests.examples_support import HttpStub
from tests.gateway.harness import GatewayThread, free_port, sim_config
from tests.services import fresh_pg_schema

MSGS: list[Any] = [{"role": "user", "content": "Is the service up?"}]


class FlakyHook:
    """Answers 500 to the first post, 204 after."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        self.calls += 1
        return web.Response(status=500 if self.calls == 1 else 204)


async def _ok(request: web.Request) -> web.StreamResponse:
    return web.Response(status=204)


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_pg_schema("slohook") as url:
        yield url


def _config(pg_url: str, stub: HttpStub) -> dict[str, Any]:
    cfg = sim_config(replicas=1)
    cfg["database_url"] = pg_url
    cfg["models"].append({"alias": "broken", "backends": [
        {"type": "vllm", "base_url": f"http://127.0.0.1:{free_port()}", "model": "x"}]})
    cfg["tenants"] = [{"name": "acme"}]
    cfg["slos"] = [{
        "name": "acme-avail", "selector": {"tenant": "acme"},
        "slis": [{"kind": "availability"}], "objective": 0.99, "window": "1d",
        "alerts": [{"severity": "page", "burn_rate": 14.4, "long_window": "1h",
                    "short_window": "5m"}],
    }]
    cfg["slo_alerting"] = {
        "evaluate_every": "1h",  # the test runs each round itself
        "retry_initial": "50ms",
        "webhooks": [
            {"url": f"{stub.url}/am", "format": "alertmanager"},
            {"url": f"{stub.url}/chat", "format": "text", "severities": ["page"]},
        ],
    }
    return cfg


def _round(gws: list[GatewayThread], offset_s: float = 0.0) -> None:
    for gw in gws:
        svc = gw.gateway.slo
        assert svc is not None
        if offset_s:
            svc.clock = lambda: time.time() + offset_s
        gw.call(svc.refresh())


def _bodies(stub: HttpStub, path: str) -> list[dict[str, Any]]:
    return [json.loads(s.body) for s in stub.seen if s.path == path]


def _caught_up(gw: GatewayThread, events: int) -> None:
    deadline = time.monotonic() + 20
    while gw.gateway.meter.stats().as_dict()["flushed"] < events:
        assert time.monotonic() < deadline, "the ledger did not catch up"
        time.sleep(0.02)


def test_one_leader_notifies_firing_retried_then_resolved(
    tmp_path: Path, pg_url: str
) -> None:
    flaky = FlakyHook()
    stub = HttpStub({"/am": flaky, "/chat": _ok}).start()
    gws: list[GatewayThread] = []
    try:
        cfg = _config(pg_url, stub)
        gws = [GatewayThread(cfg, tmp_path / f"gw{i}").start() for i in range(2)]
        key = gws[0].create_key("acme")
        with openai.OpenAI(base_url=gws[0].base_url, api_key=key, max_retries=0) as c:
            for _ in range(3):
                c.chat.completions.create(model=cfg["models"][0]["alias"], messages=MSGS,
                                          max_tokens=4)
            with pytest.raises(openai.APIStatusError):
                c.chat.completions.create(model="broken", messages=MSGS, max_tokens=4)
        _caught_up(gws[0], 4)
        _round(gws)
        leaders = [g.gateway.slo.alerting.leading for g in gws]  # type: ignore[union-attr]
        assert sorted(leaders) == [False, True]
        assert stub.wait_seen(3), "firing: a 500 and its retry to /am, one post to /chat"
        _round(gws)  # nothing new: no second notification, from either replica
        am = _bodies(stub, "/am")
        assert len(am) == 2 and am[0] == am[1] and flaky.calls == 2  # the retry
        firing = am[0]
        assert firing["status"] == "firing" and firing["version"] == "4"
        [alert] = firing["alerts"]
        assert alert["labels"] == {
            "alertname": "TokenplaneSLOBurnRate", "severity": "page", "slo": "acme-avail",
            "sli": "availability", "long_window": "1h", "short_window": "5m"}
        assert alert["endsAt"] == "0001-01-01T00:00:00Z"
        [chat] = _bodies(stub, "/chat")
        assert chat["text"].startswith("[FIRING] [page] SLO acme-avail (availability)")
        assert chat["long_burn"] == pytest.approx(25.0)
        # two hours on, the windows hold nothing bad: resolved, once
        _round(gws, offset_s=7200)
        assert stub.wait_seen(5)
        _round(gws, offset_s=7200)
        resolved = _bodies(stub, "/am")[2]
        assert resolved["status"] == "resolved"
        assert resolved["alerts"][0]["endsAt"] != "0001-01-01T00:00:00Z"
        assert _bodies(stub, "/chat")[1]["status"] == "resolved"
        assert len(stub.seen) == 5
    finally:
        for gw in gws:
            gw.stop()
        stub.stop()
