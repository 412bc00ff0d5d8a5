"""SLO classes and the gateway queue on the request path (one slow simulated replica
limited to one running request, so the queue is easy to fill)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from pydantic import ValidationError

from tests.gateway.harness import GatewayThread
from tests.gateway.raw_http import Client as RawClient
from tests.gateway.raw_http import request
from tests.gateway.test_routing_cluster import wait_for
from tokenplane.config.schema import GatewayConfig

ALIAS = "slow"


def _config(batch_deadline_s: float) -> dict[str, Any]:
    return {
        "models": [{"alias": ALIAS, "tokenizer": "cl100k_base",
                    "backends": [{"id": "s", "type": "sim", "profile": "llama3-8b-a100"}]}],
        "scheduling": {
            "max_num_seqs": 1, "tick_s": 0.02,
            "classes": {"interactive": {"priority": 0},
                        "batch": {"priority": 1, "sheddable": True,
                                  "deadline_s": batch_deadline_s}},
            "by_app": {"nightly": "batch"},
        },
    }


def _post(gw: GatewayThread, key: str, max_tokens: int, cls: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"}
    if cls is not None:
        headers["x-tokenplane-slo-class"] = cls
    body = {"model": ALIAS, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": "tell me a story"}]}
    return httpx.post(gw.base_url + "/chat/completions", json=body, headers=headers, timeout=60)


def _queued(gw: GatewayThread, cls: str) -> Callable[[], bool]:
    def check() -> bool:
        async def get() -> int:
            routing = gw.gateway.routing
            assert routing is not None and routing.hub is not None
            sched = routing.hub.queues.get((ALIAS, ""))
            st = sched.stats.get(cls) if sched is not None else None
            return st.queued if st is not None else 0
        return gw.call(get()) >= 1
    return check


def _running(gw: GatewayThread) -> bool:
    async def get() -> int:
        return gw.gateway.pools[ALIAS].endpoints[0].in_flight
    return gw.call(get()) >= 1


class Client(threading.Thread):
    def __init__(self, name: str, gw: GatewayThread, key: str, max_tokens: int,
                 cls: str | None, order: list[str]) -> None:
        super().__init__(daemon=True)
        self.label, self.gw, self.key, self.max_tokens, self.cls = name, gw, key, max_tokens, cls
        self.order = order
        self.response: httpx.Response | None = None

    def run(self) -> None:
        self.response = _post(self.gw, self.key, self.max_tokens, self.cls)
        self.order.append(self.label)


@pytest.fixture()
def gw_batch_short(tmp_path: Path) -> Any:
    gw = GatewayThread(_config(0.3), tmp_path).start()
    yield gw
    gw.stop()


def test_unknown_class_is_400(gw_batch_short: GatewayThread) -> None:
    r = _post(gw_batch_short, gw_batch_short.create_key(), 2, "platinum")
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_slo_class"


def test_sheddable_class_gets_503_with_retry_after_when_saturated(
    gw_batch_short: GatewayThread,
) -> None:
    gw = gw_batch_short
    key = gw.create_key(app="web")
    order: list[str] = []
    long = Client("long", gw, key, 150, None, order)
    long.start()
    wait_for(lambda: _running(gw))
    r = _post(gw, gw.create_key(app="nightly"), 3)  # batch by app
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "overloaded"
    assert int(r.headers["retry-after"]) >= 1
    long.join(60)
    assert long.response is not None and long.response.status_code == 200
    text = gw.gateway.metrics.render().decode()
    assert 'tokenplane_scheduler_shed_total{slo_class="batch"} 1.0' in text


def test_interactive_is_released_before_batch(tmp_path: Path) -> None:
    gw = GatewayThread(_config(600), tmp_path).start()
    try:
        key = gw.create_key(app="web")
        order: list[str] = []
        a = Client("a-interactive", gw, key, 120, None, order)
        a.start()
        wait_for(lambda: _running(gw))
        b = Client("b-batch", gw, key, 3, "batch", order)
        b.start()
        wait_for(_queued(gw, "batch"))
        c = Client("c-interactive", gw, key, 3, "interactive", order)
        c.start()
        wait_for(_queued(gw, "interactive"))
        for t in (a, b, c):
            t.join(60)
        assert order == ["a-interactive", "c-interactive", "b-batch"]
        assert all(t.response is not None and t.response.status_code == 200 for t in (a, b, c))
        text = gw.gateway.metrics.render().decode()
        assert 'tokenplane_scheduler_wait_seconds_count{slo_class="batch"} 1.0' in text
        assert 'tokenplane_scheduler_queue_length{slo_class="batch"} 0.0' in text
    finally:
        gw.stop()
    # the ledger keeps each request's wait at the gateway (the console's latency split):
    # b and c waited for a's 120 tokens on the one slot
    waits = sorted(r["queue_wait_s"] for r in gw.ledger_rows())
    assert len(waits) == 3 and waits[0] is not None and waits[0] < waits[1] <= waits[2]
    assert waits[1] > 0.05


def test_late_deferral_is_configurable(tmp_path: Path) -> None:
    cfg = _config(600)
    cfg["scheduling"]["late_defer_s"] = 0
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        routing = gw.gateway.routing
        assert routing is not None and routing.hub is not None
        assert routing.hub.scheduler((ALIAS, "")).late_defer_s == 0
    finally:
        gw.stop()
    bad = _config(600)
    bad["scheduling"]["late_defer_s"] = -1
    with pytest.raises(ValidationError, match="late_defer_s"):
        GatewayConfig.model_validate(bad)
    assert GatewayConfig.model_validate(_config(600)).scheduling.late_defer_s == 30.0


def test_a_client_that_leaves_the_queue_is_ended_at_once(tmp_path: Path) -> None:
    """Issue 13 item 2: a request waiting at the gateway for a replica whose client
    leaves is recorded cancelled / 499 at once (its reservations released), not when
    its turn would have come."""
    gw = GatewayThread(_config(600), tmp_path).start()
    try:
        order: list[str] = []
        long = Client("long", gw, gw.create_key(app="web"), 1000, None, order)  # ~10 s
        long.start()
        wait_for(lambda: _running(gw))
        key = gw.create_key(app="queued")
        body = orjson.dumps({"model": ALIAS, "max_tokens": 3,
                             "messages": [{"role": "user", "content": "hi"}]})
        with RawClient(gw.port) as c:
            c.send(request("POST", "/v1/chat/completions", body, headers={
                "authorization": f"Bearer {key}", "content-type": "application/json"}))
            wait_for(_queued(gw, "interactive"))

        def journaled() -> bool:
            async def get() -> int:
                return gw.gateway.meter.stats().journaled
            return gw.call(get()) >= 1

        wait_for(journaled, 5)  # without the fix: only once the long request ends
        assert _running(gw) and not order  # the long request still runs
    finally:
        gw.stop()
    (row,) = gw.ledger_rows("app = 'queued'")
    assert (row["status"], row["http_status"], row["error_code"]) == \
        ("cancelled", 499, "client_disconnected")
    assert row["input_tokens"] == 0  # never sent upstream: billed zero
