from __future__ import annotations

import asyncio

import pytest

from tests.metering.factories import make_event
from tokenplane.metering.events import EVENT_COLUMNS, UsageEvent
from tokenplane.metering.stores.base import LedgerSink, event_row, row_event
from tokenplane.metering.stores.open import open_sink


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
        assert applied == [[], [1, 2, 3, 4, 5, 10]]  # exactly one of them ran each migration
        assert await first.migrate_again() == []  # type: ignore[attr-defined]
        assert await _scalar(first, "SELECT COUNT(*) FROM schema_migrations") == 6
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
V10_COLUMNS = ("finish_reason",)


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
                      ("slo_class", "prefix_segments", *V5_COLUMNS, *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == [2, 3, 4, 5, 10]  # type: ignore[attr-defined]
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
                      ("prefix_segments", *V5_COLUMNS, *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == [4, 5, 10]  # type: ignore[attr-defined]
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
                      (*V5_COLUMNS, *V10_COLUMNS))
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == [5, 10]  # type: ignore[attr-defined]
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


async def test_a_v5_ledger_gains_the_advice_tables(
    sink_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger written before migration 10 keeps its rows (no finish reason); new rows
    carry theirs and fill the advice rollups; the feedback table takes scores."""
    await _old_ledger(sink_target, monkeypatch, 5, make_event(1), V10_COLUMNS)
    sink = await open_sink(sink_target)
    try:
        assert sink.applied_migrations == [10]  # type: ignore[attr-defined]
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
