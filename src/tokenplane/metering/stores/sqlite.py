"""The embedded ledger: stdlib ``sqlite3`` in WAL mode, driven from one thread.

All database work runs on a single dedicated thread (sqlite3 connections are not
shared across threads), so the event loop never blocks on the disk. Writers in other
processes serialise on ``BEGIN IMMEDIATE`` with a generous busy timeout.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tokenplane.metering.advice_rollups import advice_rows, upsert_advice_sql
from tokenplane.metering.client_rollups import client_rows, upsert_clients_sql
from tokenplane.metering.events import EVENT_COLUMNS, UsageEvent
from tokenplane.metering.rollups import (
    fingerprint_rows,
    rollup_rows,
    upsert_fingerprints_sql,
    upsert_rollups_sql,
)
from tokenplane.metering.session_rollups import session_rows, upsert_sessions_sql
from tokenplane.metering.stores.base import event_row
from tokenplane.metering.stores.migrations import SCHEMA_MIGRATIONS_DDL, SQLITE_MIGRATIONS
from tokenplane.metering.version_rollups import upsert_version_rollups_sql, version_rows

T = TypeVar("T")

_INSERT_EVENT = (
    f"INSERT INTO usage_events ({', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in EVENT_COLUMNS)}) "
    "ON CONFLICT (request_id, attempt) DO NOTHING"
)
_UPSERT_ROLLUPS = upsert_rollups_sql(lambda _: "?")
_UPSERT_FINGERPRINTS = upsert_fingerprints_sql(lambda _: "?")
_UPSERT_VERSIONS = upsert_version_rollups_sql(lambda _: "?")
_UPSERT_SESSIONS = upsert_sessions_sql(lambda _: "?")
_UPSERT_ADVICE = upsert_advice_sql(lambda _: "?")
_UPSERT_CLIENTS = upsert_clients_sql(lambda _: "?")


def _enable_wal(con: sqlite3.Connection, timeout_s: float) -> None:
    """Switch to WAL. The switch needs an exclusive lock and SQLite's busy handler does
    not always wait for it, so two processes opening a new ledger at once retry here."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            mode = con.execute("PRAGMA journal_mode=WAL").fetchone()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)  # back-off on a lock held by another opener
            delay = min(delay * 2, 0.2)
            continue
        if mode is None or str(mode[0]).lower() != "wal":
            raise RuntimeError(f"cannot enable WAL on the ledger (mode {mode!r})")
        return


def apply_sqlite_migrations(con: sqlite3.Connection) -> list[int]:
    """Apply missing migrations under ``BEGIN IMMEDIATE``; returns the versions applied."""
    applied: list[int] = []
    con.execute("BEGIN IMMEDIATE")
    try:
        con.execute(SCHEMA_MIGRATIONS_DDL)
        done = {int(r[0]) for r in con.execute("SELECT version FROM schema_migrations")}
        for version, statements in SQLITE_MIGRATIONS:
            if version in done:
                continue
            for statement in statements:
                con.execute(statement)
            con.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
            applied.append(version)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return applied


class SqliteSink:
    """``LedgerSink`` over a SQLite file (the embedded default ``<data_dir>/ledger.db``)."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, busy_timeout_s: float = 60.0) -> None:
        self.path = path
        self._busy_timeout_s = busy_timeout_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger-sqlite")
        self._con: sqlite3.Connection | None = None
        self.applied_migrations: list[int] = []

    @classmethod
    async def open(cls, path: Path, **options: Any) -> SqliteSink:
        sink = cls(path, **options)
        await sink._call(sink._open_sync)
        return sink

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, *args)

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        _enable_wal(con, self._busy_timeout_s)
        con.execute("PRAGMA synchronous=FULL")
        self.applied_migrations = apply_sqlite_migrations(con)
        self._con = con

    @property
    def con(self) -> sqlite3.Connection:
        if self._con is None:
            raise RuntimeError("sqlite sink is closed")
        return self._con

    async def write(self, batch: list[UsageEvent]) -> int:
        if not batch:
            return 0
        return await self._call(self._write_sync, batch)

    def _write_sync(self, batch: list[UsageEvent]) -> int:
        unique: dict[tuple[str, int], UsageEvent] = {}
        for ev in batch:  # the first of duplicates inside a batch wins
            unique.setdefault(ev.key, ev)
        events = list(unique.values())
        cur = self.con.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            # Fast path: one executemany; if every row went in, all events are new.
            cur.executemany(_INSERT_EVENT, [event_row(ev) for ev in events])
            if cur.rowcount == len(events):
                inserted = events
            else:  # a replay: find out row by row which events the ledger lacked
                cur.execute("ROLLBACK")
                cur.execute("BEGIN IMMEDIATE")
                inserted = []
                for ev in events:
                    cur.execute(_INSERT_EVENT, event_row(ev))
                    if cur.rowcount == 1:
                        inserted.append(ev)
            if inserted:
                cur.executemany(_UPSERT_ROLLUPS, rollup_rows(inserted))
                fps = fingerprint_rows(inserted)
                if fps:
                    cur.executemany(_UPSERT_FINGERPRINTS, fps)
                versions = version_rows(inserted)
                if versions:
                    cur.executemany(_UPSERT_VERSIONS, versions)
                sessions = session_rows(inserted)
                if sessions:
                    cur.executemany(_UPSERT_SESSIONS, sessions)
                cur.executemany(_UPSERT_ADVICE, advice_rows(inserted))
                cur.executemany(_UPSERT_CLIENTS, client_rows(inserted))
            cur.execute("COMMIT")
        except BaseException:
            if self.con.in_transaction:
                cur.execute("ROLLBACK")
            raise
        return len(inserted)

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return await self._call(self._fetch_sync, sql, tuple(params))

    def _fetch_sync(self, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        cur = self.con.execute(sql, params)
        names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return await self._call(self._execute_sync, sql, tuple(params))

    def _execute_sync(self, sql: str, params: tuple[Any, ...]) -> int:
        cur = self.con.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.execute(sql, params)
            count = cur.rowcount
            cur.execute("COMMIT")
        except BaseException:
            if self.con.in_transaction:
                cur.execute("ROLLBACK")
            raise
        return count

    async def record_price_table(self, version: str, currency: str, table: bytes) -> None:
        await self._call(self._record_price_sync, version, currency, table)

    def _record_price_sync(self, version: str, currency: str, table: bytes) -> None:
        self.con.execute(
            "INSERT INTO price_versions (version, currency, price_table, first_seen) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (version) DO NOTHING",
            (version, currency, table.decode(), time.time()),
        )

    async def migrate_again(self) -> list[int]:
        """Re-run migrations (idempotent; used by tests and ``tokenplane migrate``)."""
        return await self._call(apply_sqlite_migrations, self.con)

    async def close(self) -> None:
        if self._con is not None:
            await self._call(self._close_sync)
        self._executor.shutdown(wait=True)

    def _close_sync(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
