from __future__ import annotations

import asyncio

import pytest

from tests.metering.factories import make_event
from tokenplane.metering.events import EVENT_COLUMNS, UsageEvent
from tokenplane.metering.stores.base import LedgerSink, event_row, row_event
from tokenplane.metering.stores.migrations import SQLITE_MIGRATIONS
from tokenplane.metering.stores.open import open_sink

VERSIONS = [v for v, _ in SQLITE_MIGRATIONS]
SESSION_COLUMNS = ("session_id", "session_step", "tool_calls", "tool_output_tokens",
                   "tool_output_added", "tool_output_removed")  # migration 6


async def _scalar(sink: LedgerSink, sql: str) -> int:
    rows = await sink.fetch(sql)
    return int(next(iter(rows[0].values())))


ROLLUP_REQUESTS = "SELECT CAST(SUM(requests) AS BIGINT) AS n FROM usage_rollups WHERE grain = 'day'"


async def test_write_is_idempotent_and_rollups_count_once(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        batch = [make_event(i) for i in range(50)]
        assert await sink.write(batch) == 50
        assert await sink.write(batch) == 0  # a replay
        assert await sink.write([*batch[:10], make_event(50), make_event(50)]) == 1
        assert await _scalar(sink, "SELECT COUNT(*) AS n FROM usage_events") == 51
        assert await _scalar(sink, ROLLUP_REQUESTS) == 51
        tokens = await _scalar(
            sink, "SELECT CAST(SUM(output_tokens) AS BIGINT) FROM usage_rollups WHERE grain='hour'"
        )
        assert tokens == 51 * 7
    finally:
        await sink.close()


async def test_events_read_back_unchanged(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        original = make_event(
            3,
            flags=["pii_masked", "retry"],
            stream=True,
            first_token_ts=1.5,
            error_code=None,
            system_fingerprint="abc",
            slo_class="interactive",
        )
        await sink.write([original])
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-3"])
        assert row_event(rows[0]) == original
    finally:
        await sink.close()


async def test_migrations_idempotent_even_when_racing(sink_target: str) -> None:
    first, second = await asyncio.gather(open_sink(sink_target), open_sink(sink_target))
    try:
        applied = sorted([first.applied_migrations, second.applied_migrations])  # type: ignore[attr-defined]
        assert applied == [[], VERSIONS]  # exactly one of them ran each migration
        assert await first.migrate_again() == []  # type: ignore[attr-defined]
        assert await _scalar(first, "SELECT COUNT(*) FROM schema_migrations") == len(VERSIONS)
    finally:
        await first.close()
        await second.close()


async def test_price_table_first_write_wins(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        await sink.record_price_table("v1", "USD", b'{"a":1}')
        await sink.record_price_table("v1", "USD", b'{"a":2}')
        rows = await sink.fetch("SELECT price_table FROM price_versions WHERE version = ?", ["v1"])
        assert rows == [{"price_table": '{"a":1}'}]
    finally:
        await sink.close()


V5_COLUMNS = ("context_offered_tokens", "context_kept_tokens", "context_dropped_tokens",
              "context_dropped", "history_dropped_messages", "history_dropped_tokens",
              "overflow", "overflow_from")
V11_COLUMNS = ("cache_write_1h_tokens", "client")
V10_COLUMNS = ("finish_reason", *V11_COLUMNS)  # migrations 10 and 11


async def _old_ledger(sink_target: str, monkeypatch: pytest.MonkeyPatch, migrations_done: int,
                      event: UsageEvent, missing: tuple[str, ...]) -> None:
    """A ledger with only the first ``migrations_done`` migrations, holding ``event``
    without the ``missing`` columns (those later migrations add)."""
    from tokenplane.metering.stores import migrations, postgres, sqlite

    with monkeypatch.context() as m:
        m.setattr(sqlite, "SQLITE_MIGRATIONS", migrations.SQLITE_MIGRATIONS[:migrations_done])
        m.setattr(postgres, "POSTGRES_MIGRATIONS",
                  migrations.POSTGRES_MIGRATIONS[:migrations_done])
        old = await open_sink(sink_target)
        try:
            columns = [c for c in EVENT_COLUMNS if c not in missing]
            row = dict(zip(EVENT_COLUMNS, event_row(event), strict=True))
            marks = ", ".join("?" for _ in columns)
            await old.execute(
                f"INSERT INTO usage_events ({', '.join(columns)}) VALUES ({marks})",
                [row[c] for c in columns],
            )
        finally:
            await old.close()


async def test_a_v1_ledger_gains_the_slo_class_column(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger written before migration 2 keeps its rows; they read back with no class."""
    await _old_ledger(sink_target, monkeypatch, 1, make_event(1),
                      ("slo_class", "prefix_segments", *V5_COLUMNS, *SESSION_COLUMNS,
                       *CACHE_COLUMNS, "queue_wait_s", *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == VERSIONS[1:]  # type: ignore[attr-defined]
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-1"])
        assert row_event(rows[0]) == make_event(1)
        assert row_event(rows[0]).slo_class is None
        await sink.write([make_event(2, slo_class="batch")])
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-2"])
        assert row_event(rows[0]).slo_class == "batch"
    finally:
        await sink.close()


async def test_a_v3_ledger_gains_the_prefix_segments_column(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger written before migration 4 keeps its rows (SLO class included); they
    read back with no prefix fingerprints, and new rows carry theirs."""
    await _old_ledger(sink_target, monkeypatch, 3, make_event(1, slo_class="batch"),
                      ("prefix_segments", *V5_COLUMNS, *SESSION_COLUMNS, *CACHE_COLUMNS,
                       "queue_wait_s", *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == VERSIONS[3:]  # type: ignore[attr-defined]
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-1"])
        assert row_event(rows[0]) == make_event(1, slo_class="batch")
        assert row_event(rows[0]).prefix_segments is None
        await sink.write([make_event(2, prefix_segments="[[-5,3],[77,1]]")])
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-2"])
        assert row_event(rows[0]).prefix_segments == "[[-5,3],[77,1]]"
    finally:
        await sink.close()


async def test_a_v4_ledger_gains_the_context_columns(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger written before migration 5 keeps its rows (zero context tokens, no
    overflow); new rows carry the packing and overflow figures."""
    await _old_ledger(sink_target, monkeypatch, 4, make_event(1, prefix_segments="[[1,2]]"),
                      (*V5_COLUMNS, *SESSION_COLUMNS, *CACHE_COLUMNS, "queue_wait_s", *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == VERSIONS[4:]  # type: ignore[attr-defined]
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-1"])
        old = row_event(rows[0])
        assert old == make_event(1, prefix_segments="[[1,2]]")
        assert old.context_offered_tokens == 0 and old.overflow is None
        new = make_event(2, context_offered_tokens=900, context_kept_tokens=600,
                         context_dropped_tokens=300,
                         context_dropped='{"budget":{"documents":1,"tokens":300}}',
                         history_dropped_messages=4, history_dropped_tokens=120,
                         overflow="fallback", overflow_from="small")
        await sink.write([new])
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-2"])
        assert row_event(rows[0]) == new
    finally:
        await sink.close()


async def test_a_v4_ledger_gains_the_session_columns_and_rollups(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger written before migration 6 keeps its rows (no session); new rows carry
    their session and step, and the session rollups sum only the rows inserted."""
    await _old_ledger(sink_target, monkeypatch, 4, make_event(1, prefix_segments="[]"),
                      (*V5_COLUMNS, *SESSION_COLUMNS, *CACHE_COLUMNS, "queue_wait_s", *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == VERSIONS[4:]  # type: ignore[attr-defined]
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-1"])
        old = row_event(rows[0])
        assert old.session_id is None and old.session_step is None and old.tool_calls == 0
        steps = [make_event(10 + i, tenant="acme", app="agent", session_id="s1",
                            session_step=i + 1, tool_calls=i, tool_output_added=100 * i,
                            tool_output_tokens=100 * i, cost_micros=1000 + i,
                            arrival_ts=1_700_000_000.0 + i)
                 for i in range(4)]
        retry = make_event(13, attempt=1, tenant="acme", app="agent", session_id="s1",
                           session_step=4, status="ok", cost_micros=7)
        other = make_event(20, tenant="globex", session_id="s1", session_step=1)
        assert await sink.write([*steps, retry, other]) == 6
        assert await sink.write(steps) == 0  # a replay adds nothing to the rollups
        back = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-12"])
        assert row_event(back[0]) == steps[2]
        got = await sink.fetch("SELECT * FROM session_rollups ORDER BY tenant")
        assert [(r["tenant"], r["session_id"]) for r in got] == [("acme", "s1"), ("globex", "s1")]
        acme = got[0]
        assert acme["app"] == "agent"
        assert (acme["requests"], acme["steps"], acme["max_step"]) == (5, 4, 4)
        assert acme["tool_calls"] == 0 + 1 + 2 + 3
        assert acme["tool_output_added"] == 600
        assert acme["cost_micros"] == 1000 + 1001 + 1002 + 1003 + 7
        assert acme["input_tokens"] == 5 * 15
        assert acme["first_ts"] == 1_700_000_000.0
        assert acme["last_ts"] == 1_700_000_013.0
    finally:
        await sink.close()


CACHE_COLUMNS = ("cache", "cache_source_request_id", "saved_input_tokens",
                 "saved_output_tokens", "saved_cost_micros")


async def test_a_v4_ledger_gains_the_cache_columns(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger written before migration 7 keeps its rows; they read back as no cache
    hit with nothing saved, and a hit's row carries its kind, source and savings."""
    await _old_ledger(sink_target, monkeypatch, 4, make_event(1, slo_class="batch"),
                      (*V5_COLUMNS, *SESSION_COLUMNS, *CACHE_COLUMNS, "queue_wait_s", *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == VERSIONS[4:]  # type: ignore[attr-defined]
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-1"])
        old = row_event(rows[0])
        assert old == make_event(1, slo_class="batch")
        assert old.cache is None and old.saved_cost_micros == 0
        hit = make_event(2, cache="semantic", cache_source_request_id="req-1",
                         saved_input_tokens=30, saved_output_tokens=12, saved_cost_micros=77)
        await sink.write([hit])
        rows = await sink.fetch("SELECT * FROM usage_events WHERE cache = ?", ["semantic"])
        assert [row_event(r) for r in rows] == [hit]
    finally:
        await sink.close()


async def test_a_v8_ledger_gains_queue_waits_and_version_rollups(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 9: old rows read back with no queue wait; new attempts that reached an
    upstream add to ``version_rollups`` (hour and day), with the time split into
    waiting at the gateway, the gateway's own work, the engine's TTFT and decode."""
    await _old_ledger(sink_target, monkeypatch, 8, make_event(1),
                      ("queue_wait_s", *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == VERSIONS[8:] and 9 in VERSIONS  # type: ignore[attr-defined]
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-1"])
        assert row_event(rows[0]).queue_wait_s is None
        t = 1_700_000_000.0
        timed = dict(arrival_ts=t, upstream_start_ts=t + 0.5, first_token_ts=t + 0.8,
                     last_token_ts=t + 1.8, ts=t + 1.9, queue_wait_s=0.25)
        await sink.write([
            make_event(2, model_version="v1", tenant="a", **timed),
            make_event(3, model_version="v1", tenant="a", status="error", **timed),
            make_event(4, model_version="v2", tenant="a", **timed),
            make_event(5, model_version="v2", tenant="a"),  # refused: never reached one
        ])
        got = await sink.fetch(
            "SELECT grain, model_version, CAST(SUM(requests) AS BIGINT) AS requests, "
            "CAST(SUM(errors) AS BIGINT) AS errors, CAST(SUM(timed) AS BIGINT) AS timed, "
            "CAST(SUM(queue_us) AS BIGINT) AS q, CAST(SUM(gateway_us) AS BIGINT) AS g, "
            "CAST(SUM(ttft_us) AS BIGINT) AS f, CAST(SUM(decode_us) AS BIGINT) AS d, "
            "CAST(SUM(output_tokens) AS BIGINT) AS o FROM version_rollups "
            "GROUP BY grain, model_version ORDER BY grain, model_version")
        assert [(r["grain"], r["model_version"], int(r["requests"]), int(r["errors"]),
                 int(r["timed"]), int(r["q"]), int(r["g"]), int(r["f"]), int(r["d"]),
                 int(r["o"])) for r in got] == [
            ("day", "v1", 2, 1, 2, 500_000, 700_000, 600_000, 2_000_000, 14),
            ("day", "v2", 1, 0, 1, 250_000, 350_000, 300_000, 1_000_000, 7),
            ("hour", "v1", 2, 1, 2, 500_000, 700_000, 600_000, 2_000_000, 14),
            ("hour", "v2", 1, 0, 1, 250_000, 350_000, 300_000, 1_000_000, 7),
        ]
        assert await sink.write([make_event(2, model_version="v1", **timed)]) == 0
        assert await _scalar(sink, "SELECT CAST(SUM(requests) AS BIGINT) FROM version_rollups "
                                   "WHERE grain = 'day'") == 3  # a replay adds nothing
    finally:
        await sink.close()


async def test_a_v8_ledger_gains_the_advice_tables(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger written before migration 10 keeps its rows (no finish reason); new rows
    carry theirs and fill the advice rollups; the feedback table takes scores."""
    await _old_ledger(sink_target, monkeypatch, 8, make_event(1),
                      ("queue_wait_s", *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == [9, 10, 11, 12]  # type: ignore[attr-defined]
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-1"])
        assert row_event(rows[0]) == make_event(1)
        assert row_event(rows[0]).finish_reason is None
        new = [make_event(i, finish_reason="length", upstream_start_ts=1.0,
                          model_version="v2", system_fingerprint="fp") for i in (2, 5)]
        assert await sink.write(new) == 2
        assert await sink.write(new) == 0  # a replay adds nothing to the rollups
        rows = await sink.fetch("SELECT * FROM usage_events WHERE request_id = ?", ["req-2"])
        assert row_event(rows[0]) == new[0]
        sums = await sink.fetch(
            "SELECT tenant, app, version, template, requests, answers, length_finishes, "
            "answer_output_sq FROM advice_rollups ORDER BY app")
        assert sums == [{"tenant": "t2", "app": "app0", "version": "v2", "template": "fp",
                         "requests": 1, "answers": 1, "length_finishes": 1,
                         "answer_output_sq": 49},
                        {"tenant": "t2", "app": "app1", "version": "v2", "template": "fp",
                         "requests": 1, "answers": 1, "length_finishes": 1,
                         "answer_output_sq": 49}]
    finally:
        await sink.close()


async def test_a_v10_ledger_gains_the_client_rollups_empty(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Migration 11 adds ``client_rollups``: a ledger written before it has no rows
    there for its old events; new events fill it, once."""
    await _old_ledger(sink_target, monkeypatch, 10, make_event(1), V11_COLUMNS)
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == [11, 12]  # type: ignore[attr-defined]
        assert await _scalar(sink, "SELECT COUNT(*) FROM client_rollups") == 0
        new = [make_event(2, operation="messages", client="claude-cli"), make_event(3)]
        assert await sink.write(new) == 2
        assert await sink.write(new) == 0
        rows = await sink.fetch("SELECT operation, client, requests, input_tokens "
                                "FROM client_rollups ORDER BY operation")
        assert [(r["operation"], r["client"], int(r["requests"]), int(r["input_tokens"]))
                for r in rows] == [("chat", "", 1, 15), ("messages", "claude-cli", 1, 15)]
    finally:
        await sink.close()
