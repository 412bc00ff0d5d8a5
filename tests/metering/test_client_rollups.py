"""The day rollups by API (operation) and client, on both sinks: upserted with the
events, once per event (a replay adds nothing), equal to the raw events' sums; the
report over them; a ledger from before migration 11 gains the table empty."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.metering.factories import make_event
from tokenplane.metering.client_reports import client_report, day_bounds
from tokenplane.metering.client_rollups import CLIENT_MEASURES, client_rows
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.open import open_sink

DAY0 = 1_699_920_000  # 2023-11-14 00:00 UTC
OPERATIONS = ("chat", "text_completion", "embeddings", "messages")
CLIENTS = ("claude-cli", "openai-python", "langchain-anthropic", None)


def _traffic(n: int, seed: int = 7) -> list[UsageEvent]:
    rng = random.Random(seed)
    return [make_event(
        i, ts=DAY0 + rng.randrange(3 * 86400), tenant=rng.choice(("acme", "globex")),
        app=rng.choice(("chat", "ide")), operation=rng.choice(OPERATIONS),
        client=rng.choice(CLIENTS), status=rng.choice(("ok", "ok", "error", "cancelled")),
        input_tokens=rng.randrange(1000), cached_input_tokens=rng.randrange(50),
        cache_write_tokens=rng.randrange(30), output_tokens=rng.randrange(500),
        cost_micros=rng.randrange(10_000), currency=rng.choice(("USD", "USD", "EUR")),
    ) for i in range(n)]


def _raw_sums(events: list[UsageEvent]) -> dict[tuple[Any, ...], list[int]]:
    out: dict[tuple[Any, ...], list[int]] = {}
    for ev in events:
        key = (int(ev.ts) // 86400 * 86400, ev.tenant, ev.app, ev.operation,
               ev.client or "", ev.currency)
        vals = [1, int(ev.status != "ok"), ev.input_tokens, ev.cached_input_tokens,
                ev.cache_write_tokens, ev.output_tokens, ev.cost_micros]
        out[key] = [a + b for a, b in zip(out.get(key, [0] * len(vals)), vals, strict=True)]
    return out


async def _table(sink: Any) -> dict[tuple[Any, ...], list[int]]:
    rows = await sink.fetch("SELECT * FROM client_rollups")
    return {(int(r["bucket"]), r["tenant"], r["app"], r["operation"], r["client"],
             r["currency"]): [int(r[m]) for m in CLIENT_MEASURES] for r in rows}


def test_rows_are_summed_per_key_in_key_order() -> None:
    events = _traffic(200)
    rows = client_rows(events)
    assert [r[:6] for r in rows] == sorted(r[:6] for r in rows)
    assert {r[:6]: list(r[6:]) for r in rows} == _raw_sums(events)


async def test_rollups_equal_the_events_and_a_replay_adds_nothing(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        events = _traffic(300)
        assert await sink.write(events[:120]) == 120
        assert await sink.write(events[100:]) == 180  # overlaps: 20 already in
        assert await sink.write(events) == 0  # a whole replay
        assert await _table(sink) == _raw_sums(events)
        nulls = await sink.fetch("SELECT COUNT(*) AS n FROM client_rollups WHERE client = ''")
        assert int(nulls[0]["n"]) > 0  # no User-Agent: the client ''
    finally:
        await sink.close()


async def test_report_by_api_and_client_with_shares(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        def ev(i: int, **kw: Any) -> UsageEvent:
            base: dict[str, Any] = dict(ts=DAY0 + 3600 + i, tenant="acme", app="ide",
                                        input_tokens=100, output_tokens=20, cost_micros=1000)
            return make_event(i, **(base | kw))

        await sink.write([
            *(ev(i, operation="messages", client="claude-cli") for i in range(3)),
            ev(3, operation="chat", client="openai-python", input_tokens=10),
            ev(4, operation="chat", client=None, status="error"),
            ev(5, operation="messages", client="claude-cli", tenant="globex"),
            ev(6, operation="embeddings", client="openai-python", ts=DAY0 - 10),  # day before
        ])
        rows = await client_report(sink, DAY0 + 7200, DAY0 + 7200, "acme")
        # bounds inside day 0 read the whole day; the day before is out
        assert [(r["api"], r["client"], r["requests"], r["total_tokens"]) for r in rows] == [
            ("Anthropic Messages", "claude-cli", 3, 360),
            ("OpenAI Chat", None, 1, 120),
            ("OpenAI Chat", "openai-python", 1, 30),
        ]
        assert [r["request_share"] for r in rows] == [0.6, 0.2, 0.2]
        assert [r["token_share"] for r in rows] == [0.7059, 0.2353, 0.0588]
        assert rows[0]["cost"] == "0.003000" and rows[0]["cost_share"] == 0.6
        assert rows[1]["errors"] == 1 and rows[1]["operation"] == "chat"
        everyone = await client_report(sink, by=["tenant"])
        assert {(r["tenant"], r["api"]) for r in everyone} >= {
            ("globex", "Anthropic Messages"), ("acme", "OpenAI Embeddings")}
        assert sum(r["requests"] for r in everyone) == 7
        assert round(sum(r["request_share"] for r in everyone), 3) == 1.0
        with pytest.raises(ValueError):
            await client_report(sink, by=["model"])
    finally:
        await sink.close()


def test_day_bounds_cover_the_days_the_bounds_fall_in() -> None:
    assert day_bounds(DAY0 + 5, DAY0 + 86400) == (DAY0, DAY0 + 86400)
    assert day_bounds(DAY0 + 5, DAY0 + 86401) == (DAY0, DAY0 + 2 * 86400)
    assert day_bounds(None, None) == (None, None)
