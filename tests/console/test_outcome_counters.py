"""The console's counters name what became of each request (issue 31): refused by a
limit or budget (the gateway's own 429s), client errors (other 4xx: bad input, an
unknown model, a wrong content type), gateway or upstream failures (5xx) and cancelled
requests are counted apart, against a ledger holding a known mix of each; requests
that never named a servable model are not a row of "top models"; the Budgets page
counts only limits' refusals and says which currency its money is in."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.console.conftest import MODEL, Console, caught_up
from tests.console.test_console_http import signed_in
from tests.gateway.harness import GatewayThread, sim_config
from tests.metering.factories import make_event
from tokenplane.meta.limit_store import LimitTarget

DEAD = "http://127.0.0.1:9"  # discard: nothing listens, every call fails to connect


def _tile(page: str, name: str) -> int:
    found = re.search(rf'id="{name}">([0-9,]+)<', page)
    assert found is not None, name
    return int(found.group(1).replace(",", ""))


def test_counters_name_refusals_client_errors_failures_and_cancellations(
    tmp_path: Path,
) -> None:
    cfg = sim_config(profile="instant")
    cfg["models"].append({"alias": "down", "tokenizer": "cl100k_base", "backends": [
        {"id": "dead", "type": "vllm", "base_url": DEAD}]})
    cfg["tenants"] = [{"name": "default"}, {"name": "acme"}]
    cfg["observe"] = {"access_log": {"enabled": False}}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        admin = gw.create_key("default", admin=True)
        key = gw.create_key("acme", app="chat")
        assert gw.gateway.admission is not None
        gw.gateway.admission.limits.set(LimitTarget("acme"), {"rpm": 4, "budget_micros": 5_000_000,
                                                              "budget_period": "monthly"})
        msgs = [{"role": "user", "content": "hello"}]
        sent = 0
        with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as c:
            for _ in range(2):  # ok
                c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4)  # type: ignore[arg-type]
                sent += 1
            with pytest.raises(openai.BadRequestError):  # 400: bad input
                c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=-3)  # type: ignore[arg-type]
            sent += 1
            with pytest.raises(openai.NotFoundError):  # 404: no such model
                c.chat.completions.create(model="nope", messages=msgs)  # type: ignore[arg-type]
            sent += 1
            with pytest.raises(openai.APIStatusError) as down:  # 5xx: the upstream is down
                c.chat.completions.create(model="down", messages=msgs, max_tokens=4)  # type: ignore[arg-type]
            assert down.value.status_code >= 500
            sent += 1
            r = httpx.post(gw.base_url + "/chat/completions", content=b"<xml/>", timeout=30,
                           headers={"authorization": f"Bearer {key}",
                                    "content-type": "text/xml"})
            assert r.status_code == 415, r.text
            sent += 1
            limited = 0
            for _ in range(3):  # the rpm limit of 4 refuses what is over it
                try:
                    c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=4)  # type: ignore[arg-type]
                except openai.RateLimitError:
                    limited += 1
                sent += 1
        assert limited >= 1
        caught_up(gw, sent)
        now = time.time()
        gone = [make_event(900 + i, ts=now, tenant="acme", app="chat", model=MODEL,
                           status="cancelled", http_status=499, upstream_start_ts=now - 1)
                for i in range(2)]
        gw.call(gw.gateway.meter.sink.write(gone))
        console = Console(gw, admin, key, key, key)
        with signed_in(console, admin) as h:
            page = h.get("/console/overview").text
            budgets = h.get("/console/budgets").text
        assert _tile(page, "requests-today") == sent + 2
        assert _tile(page, "limited-today") == limited
        assert _tile(page, "client-errors-today") == 3  # 400, 404, 415
        assert _tile(page, "failures-today") == 1
        assert _tile(page, "cancelled-today") == 2
        assert 'id="errors-today"' not in page and 'id="refused-today"' not in page
        top_models = page.split('id="top-model"', 1)[1].split("</section>", 1)[0]
        assert MODEL in top_models and "unknown" not in top_models
        # Budgets: the refusals are the limit's only; money is named with its currency
        refused = re.search(r'<table id="refusals">.*?<td class="num">(\d+)</td>', budgets,
                            re.S)
        assert refused is not None and int(refused.group(1)) == limited
        assert "micro-units" not in budgets
        assert re.search(r'data-col="unit">money \(USD\)<', budgets)
        # Audit: the verdict is governance's, the outcome what became of the request
        with signed_in(console, admin) as h:
            deadline = time.monotonic() + 20
            while True:
                audit = h.get("/console/audit").text
                got = re.findall(r'data-col="outcome">([^<]+)</td><td data-col="status">'
                                 r'(\d+)<', audit)
                if len(got) >= sent or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        outcomes = {(o, int(s)) for o, s in got}
        assert outcomes == {("completed", 200), ("client error", 400), ("client error", 404),
                            ("client error", 415), ("refused by a limit or budget", 429),
                            ("gateway or upstream failure", 503)} or \
            outcomes == {("completed", 200), ("client error", 400), ("client error", 404),
                         ("client error", 415), ("refused by a limit or budget", 429),
                         ("gateway or upstream failure", 502)}, outcomes
        assert "Governance verdict" in audit and 'id="seq-note"' in audit
        # governance decided nothing about what ended before it screened the request
        rows = re.findall(r'data-col="verdict"><span class="chip[^"]*">([^<]+)</span></td>'
                          r'<td data-col="outcome">[^<]*</td><td data-col="status">(\d+)<',
                          audit)
        verdicts = {int(st): v for v, st in rows}
        assert verdicts[404] == verdicts[400] == verdicts[415] == \
            "not screened (ended before governance)", rows
        assert verdicts[200] == verdicts[429] == "allow", rows
        # metrics: tokenplane_requests_total names each outcome too
        by_outcome: dict[str, float] = {}
        for fam in text_string_to_metric_families(httpx.get(gw.metrics_url, timeout=10).text):
            for sample in fam.samples:
                if sample.name == "tokenplane_requests_total":
                    o = sample.labels["outcome"]
                    by_outcome[o] = by_outcome.get(o, 0) + sample.value
        assert by_outcome == {"ok": sent - 4 - limited, "limited": limited,
                              "client_errors": 3, "failures": 1}, by_outcome
    finally:
        gw.stop()
