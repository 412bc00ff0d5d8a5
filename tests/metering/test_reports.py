from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from tests.metering.factories import make_event
from tokenplane.metering.reports import (
    choose_grain,
    fingerprint_report,
    format_rows,
    parse_time_bound,
    token_source_report,
    top_consumers,
    usage_report,
)
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import open_sink

DAY0 = 1_699_920_000  # 2023-11-14 00:00:00 UTC


@pytest.fixture
async def ledger(sink_target: str) -> AsyncIterator[LedgerSink]:
    sink = await open_sink(sink_target)
    events = []
    for i in range(60):
        events.append(
            make_event(
                i,
                ts=DAY0 + (i % 2) * 86400 + i * 61,  # two days, spread over minutes
                tenant="acme" if i % 3 else "globex",
                app="rag" if i % 2 else "chat",
                input_system=100,
                input_context=50 if i % 2 else 0,
                input_user=10,
                input_tokens=160 if i % 2 else 110,
                output_tokens=20,
                cost_micros=1000 if i % 3 else 5000,
                system_fingerprint="fp-shared" if i < 40 else f"fp-{i}",
            )
        )
    await sink.write(events)
    yield sink
    await sink.close()


async def test_usage_report_groups_and_filters_by_tenant(ledger: LedgerSink) -> None:
    rows = await usage_report(ledger, ["tenant"])
    by_tenant = {r["tenant"]: r for r in rows}
    assert by_tenant["acme"]["requests"] == 40 and by_tenant["globex"]["requests"] == 20
    assert by_tenant["globex"]["cost_micros"] == 20 * 5000
    assert by_tenant["globex"]["cost"] == "0.100000"
    scoped = await usage_report(ledger, ["tenant", "app"], tenant="globex")
    assert {r["tenant"] for r in scoped} == {"globex"}
    assert sum(r["requests"] for r in scoped) == 20


async def test_usage_report_by_day_and_time_window(ledger: LedgerSink) -> None:
    days = await usage_report(ledger, ["day"], since=DAY0, until=DAY0 + 2 * 86400)
    assert [(r["day"], r["requests"]) for r in days] == [("2023-11-14", 30), ("2023-11-15", 30)]
    # a minute-aligned window: day-0 events (even i) at i*61 s, before 20:00 -> i <= 18
    window = await usage_report(ledger, ["tenant"], since=DAY0, until=DAY0 + 20 * 60)
    assert sum(r["requests"] for r in window) == 10


def test_grain_follows_bound_alignment() -> None:
    assert choose_grain(DAY0, DAY0 + 86400)[0] == "day"
    assert choose_grain(DAY0 + 3600, None)[0] == "hour"
    assert choose_grain(DAY0 + 61, DAY0 + 600) == ("minute", DAY0 + 60, DAY0 + 600)
    assert choose_grain(None, None)[0] == "day"


async def test_token_sources_fingerprints_and_top_consumers(ledger: LedgerSink) -> None:
    rows = await token_source_report(ledger)
    # per (tenant, app): the two tenants' apps of the same name are not merged
    assert [(r["tenant"], r["app"]) for r in rows] == [
        ("acme", "chat"), ("acme", "rag"), ("globex", "chat"), ("globex", "rag")]
    sources = {(r["tenant"], r["app"]): r for r in rows}
    assert sources["acme", "rag"]["context_tokens"] == 20 * 50
    assert sources["globex", "rag"]["context_tokens"] == 10 * 50
    assert sources["globex", "chat"]["context_tokens"] == 0
    assert sum(v for k, v in sources["acme", "rag"].items() if k.endswith("_share")) == \
        pytest.approx(1.0, abs=1e-3)
    fps = await fingerprint_report(ledger)
    # per (tenant, app); prompts seen once are left out
    assert sorted((f["tenant"], f["app"], f["fingerprint"], f["requests"]) for f in fps) == [
        ("acme", "chat", "fp-shared", 13),
        ("acme", "rag", "fp-shared", 13),
        ("globex", "chat", "fp-shared", 7),
        ("globex", "rag", "fp-shared", 7),
    ]
    assert fps[0]["requests"] == 13 and fps[0]["system_tokens"] == 1300
    top = await top_consumers(ledger, "tenant", limit=1)
    assert [t["tenant"] for t in top] == ["globex"]  # 100000 micros vs 40000
    by_tokens = await top_consumers(ledger, "tenant", order="tokens", limit=1)
    assert [t["tenant"] for t in by_tokens] == ["acme"]


def test_format_rows() -> None:
    rows = [{"tenant": "acme", "requests": 3}, {"tenant": "globex", "requests": 12}]
    table = format_rows(rows, "table").splitlines()
    assert table[0].split() == ["tenant", "requests"]
    assert table[2].endswith(" 3") and table[3].endswith("12")
    assert list(csv.DictReader(io.StringIO(format_rows(rows, "csv")))) == [
        {"tenant": "acme", "requests": "3"},
        {"tenant": "globex", "requests": "12"},
    ]
    assert orjson.loads(format_rows(rows, "json")) == rows
    assert format_rows([], "table") == "(no rows)\n"
    with pytest.raises(ValueError):
        format_rows(rows, "xml")


async def test_unknown_dimension_rejected(ledger: LedgerSink) -> None:
    with pytest.raises(ValueError, match="cannot group by"):
        await usage_report(ledger, ["colour"])


def test_datetime_bounds() -> None:
    since = datetime(2023, 11, 14, tzinfo=UTC)
    assert choose_grain(since, datetime(2023, 11, 14, 5)) == ("hour", DAY0, DAY0 + 5 * 3600)


def test_parse_time_bound() -> None:
    now = DAY0 + 86400
    assert parse_time_bound("24h", now) == DAY0
    assert parse_time_bound("1d", now) == DAY0
    assert parse_time_bound("90m", now) == now - 5400
    assert parse_time_bound("2023-11-14", now) == DAY0
    assert parse_time_bound("2023-11-14T01:00:00+01:00", now) == DAY0
    assert parse_time_bound(str(DAY0), now) == DAY0
    with pytest.raises(ValueError, match="bad time"):
        parse_time_bound("yesterday", now)


async def test_refused_requests_are_reported_apart(sink_target: str) -> None:
    """A request refused before it ran (no upstream start) carries the gateway's prompt
    estimate; reports count it in refused / refused_input_tokens, not in
    estimated_input_tokens, which stays comparable to input_tokens."""
    sink = await open_sink(sink_target)
    try:
        ran = make_event(1, tenant="acme", app="a", input_system=0, input_user=100,
                         input_tokens=100, estimated_input_tokens=100,
                         upstream_start_ts=1_700_000_000.5)
        refused = make_event(2, tenant="acme", app="a", input_system=0, input_user=0,
                             input_tokens=0, output_tokens=0, estimated_input_tokens=5000,
                             status="error", http_status=429, error_code="rate_limit_exceeded")
        await sink.write([ran, refused])
        [row] = await usage_report(sink, ["tenant"])
        assert (row["requests"], row["errors"], row["refused"]) == (2, 1, 1)
        assert row["input_tokens"] == row["estimated_input_tokens"] == 100
        assert row["refused_input_tokens"] == 5000
    finally:
        await sink.close()


async def test_a_v1_ledger_is_upgraded(tmp_path: Path) -> None:
    """A ledger created before the refused columns gets them when a sink opens it."""
    import sqlite3

    from tokenplane.metering.stores.migrations import SCHEMA_MIGRATIONS_DDL, SQLITE_MIGRATIONS

    path = tmp_path / "ledger.db"
    con = sqlite3.connect(path)
    con.execute(SCHEMA_MIGRATIONS_DDL)
    for stmt in SQLITE_MIGRATIONS[0][1]:
        con.execute(stmt)
    con.execute("INSERT INTO schema_migrations VALUES (1, 0)")
    con.commit()
    con.close()
    sink = await open_sink(str(path))
    try:
        await sink.write([make_event(3, estimated_input_tokens=40)])  # never ran
        [row] = await usage_report(sink, [])
        assert (row["refused"], row["refused_input_tokens"]) == (1, 40)
    finally:
        await sink.close()
