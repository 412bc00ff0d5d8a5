"""SLOs in a running gateway: the live counters, the ledger-fed evaluation behind
``GET /admin/v1/slos`` and the Prometheus series, tenant scoping, and a restart in the
middle of a window that keeps every count (SQLite and PostgreSQL ledgers)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.harness import GatewayThread, free_port, sim_config
from tests.services import fresh_pg_schema

MSGS: list[Any] = [{"role": "user", "content": "How are my tokens doing?"}]
SLOS = [
    {"name": "chat-ttft", "selector": {"slo_class": "interactive"},
     "slis": [{"kind": "ttft", "threshold": "30s"}], "objective": 0.9, "window": "1d"},
    {"name": "acme-avail", "selector": {"tenant": "acme"},
     "slis": [{"kind": "availability"}], "objective": 0.99, "window": "1d"},
    {"name": "globex-avail", "selector": {"tenant": "globex"},
     "slis": [{"kind": "availability"}], "objective": 0.99, "window": "1d"},
]


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param == "sqlite":
        yield None
        return
    with fresh_pg_schema("slo") as url:
        yield url


def _config(database_url: str | None) -> dict[str, Any]:
    cfg = sim_config(replicas=1)
    # an alias whose only upstream refuses connections: a fault of the service
    cfg["models"].append({"alias": "broken", "backends": [
        {"type": "vllm", "base_url": f"http://127.0.0.1:{free_port()}", "model": "x"}]})
    cfg["slos"] = SLOS
    cfg["tenants"] = [{"name": "acme"}, {"name": "globex"}]
    if database_url is not None:
        cfg["database_url"] = database_url
    return cfg


def _slos(gw: GatewayThread, key: str, **params: str) -> httpx.Response:
    assert gw.gateway.slo is not None
    gw.call(gw.gateway.slo.refresh())
    return httpx.get(gw.base_url.removesuffix("/v1") + "/admin/v1/slos", params=params,
                     headers={"authorization": f"Bearer {key}"}, timeout=10)


def _sli(body: dict[str, Any], slo: str) -> dict[str, Any]:
    [row] = [s for s in body["data"] if s["name"] == slo]
    [sli] = row["slis"]
    return dict(sli)


def _ledger_caught_up(gw: GatewayThread, events: int) -> None:
    """Wait (bounded) until the flusher has written every journaled event."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        stats = gw.gateway.meter.stats().as_dict()
        if stats["flushed"] >= events and stats["lag"] == 0:
            return
        time.sleep(0.02)
    raise AssertionError(f"the ledger did not catch up: {stats}")


def _traffic(gw: GatewayThread, key: str, model: str) -> None:
    with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as c:
        for _ in range(3):
            list(c.chat.completions.create(model=model, messages=MSGS, max_tokens=4,
                                           stream=True))
        with pytest.raises(openai.APIStatusError) as err:  # the upstream is down
            c.chat.completions.create(model="broken", messages=MSGS, max_tokens=4)
        assert err.value.status_code >= 500
        with pytest.raises(openai.BadRequestError):  # the client's mistake: not valid
            c.chat.completions.create(model=model, messages=MSGS, max_tokens=0)


def test_slos_from_the_ledger_survive_a_restart(
    tmp_path: Path, ledger_url: str | None
) -> None:
    cfg = _config(ledger_url)
    gw = GatewayThread(cfg, tmp_path / "gw").start()
    try:
        model = cfg["models"][0]["alias"]
        admin = gw.create_key("default", admin=True)
        acme = gw.create_key("acme")
        globex = gw.create_key("globex")
        _traffic(gw, acme, model)
        _ledger_caught_up(gw, 5)
        body = _slos(gw, admin).json()
        avail = _sli(body, "acme-avail")
        assert (avail["valid"], avail["bad"]) == (4, 1)  # 3 streams + the 500, not the 400
        assert avail["sli_ratio"] == pytest.approx(0.75)
        assert avail["bad_events_left"] == pytest.approx(0.01 * 4 - 1)
        assert avail["budget_remaining"] == pytest.approx((0.04 - 1) / 0.04)
        assert avail["burn_rates"]["1h"] == pytest.approx(25.0)
        assert {a["severity"] for a in avail["alerts"]} == {"page"}
        ttft = _sli(body, "chat-ttft")
        assert (ttft["valid"], ttft["bad"]) == (3, 0)
        # a tenant sees only the SLOs that name it
        mine = _slos(gw, acme).json()
        assert [s["name"] for s in mine["data"]] == ["acme-avail"]
        assert _slos(gw, globex, tenant="acme").status_code == 403
        # the live counters and the evaluation, on /metrics
        text = httpx.get(gw.metrics_url, timeout=10).text
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for fam in text_string_to_metric_families(text) for s in fam.samples}
        assert samples[("tokenplane_slo_events_total", (
            ("sli", "availability"), ("slo", "acme-avail"), ("verdict", "bad")))] == 1
        assert samples[("tokenplane_slo_events_total", (
            ("sli", "availability"), ("slo", "acme-avail"), ("verdict", "good")))] == 3
        assert samples[("tokenplane_slo_sli_ratio", (
            ("sli", "availability"), ("slo", "acme-avail")))] == pytest.approx(0.75)
        assert samples[("tokenplane_slo_alert_firing", (
            ("long_window", "1h"), ("severity", "page"), ("short_window", "5m"),
            ("sli", "availability"), ("slo", "acme-avail")))] == 1
    finally:
        gw.stop()
    again = GatewayThread(cfg, tmp_path / "gw").start()  # same data directory and ledger
    try:
        avail = _sli(_slos(again, admin).json(), "acme-avail")
        assert (avail["valid"], avail["bad"]) == (4, 1)
    finally:
        again.stop()
