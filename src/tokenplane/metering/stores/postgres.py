"""The shared ledger: PostgreSQL through an asyncpg pool.

A batch is ``COPY``'d into a per-connection temporary staging table, then moved with
one ``INSERT .. SELECT .. ON CONFLICT DO NOTHING RETURNING`` whose returned keys tell
exactly which events were new; rollups for those are upserted in the same
transaction. Migrations run under a transaction-scoped advisory lock.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import asyncpg

from tokenplane.metering.advice_rollups import (
    ADVICE_KEY,
    ADVICE_MEASURES,
    advice_rows,
    upsert_advice_sql,
)
from tokenplane.metering.client_rollups import (
    CLIENT_KEY,
    CLIENT_MEASURES,
    client_rows,
    upsert_clients_sql,
)
from tokenplane.metering.events import EVENT_COLUMNS, UsageEvent
from tokenplane.metering.rollups import (
    DIMENSIONS,
    MEASURES,
    fingerprint_rows,
    rollup_rows,
    upsert_fingerprints_sql,
    upsert_rollups_sql,
)
from tokenplane.metering.session_rollups import (
    SESSION_COLUMNS,
    session_rows,
    upsert_sessions_sql,
)
from tokenplane.metering.stores.base import event_row
from tokenplane.metering.stores.migrations import POSTGRES_MIGRATIONS, SCHEMA_MIGRATIONS_DDL
from tokenplane.metering.version_rollups import (
    VERSION_DIMENSIONS,
    VERSION_MEASURES,
    upsert_version_rollups_sql,
    version_rows,
)

_MIGRATION_LOCK = 0x746F6B656E  # "token"
_STAGING = "usage_events_staging"
_MOVE = (
    f"INSERT INTO usage_events SELECT * FROM {_STAGING} "
    "ON CONFLICT (request_id, attempt) DO NOTHING RETURNING request_id, attempt"
)


def _unnest(types: Sequence[str]) -> str:
    """``SELECT * FROM unnest($1::t1[], ...)``: many rows in one statement."""
    return (
        "SELECT * FROM unnest(" + ", ".join(f"${i + 1}::{t}[]" for i, t in enumerate(types)) + ")"
    )


_UPSERT_ROLLUPS = upsert_rollups_sql(
    lambda i: f"${i + 1}",
    _unnest(["text", "bigint", *["text"] * len(DIMENSIONS), *["bigint"] * len(MEASURES)]),
)
_UPSERT_FINGERPRINTS = upsert_fingerprints_sql(
    lambda i: f"${i + 1}",
    _unnest(["text", "text", "text", "bigint", "bigint", "float8", "float8"]),
)
_UPSERT_ADVICE = upsert_advice_sql(
    lambda i: f"${i + 1}",
    _unnest(["bigint", *["text"] * (len(ADVICE_KEY) - 1), *["bigint"] * len(ADVICE_MEASURES)]),
)
_UPSERT_CLIENTS = upsert_clients_sql(
    lambda i: f"${i + 1}",
    _unnest(["bigint", *["text"] * (len(CLIENT_KEY) - 1), *["bigint"] * len(CLIENT_MEASURES)]),
)

_UPSERT_SESSIONS = upsert_sessions_sql(
    lambda i: f"${i + 1}",
    _unnest(["text"] * 4 + ["bigint"] * (len(SESSION_COLUMNS) - 6) + ["float8", "float8"]),
)


_UPSERT_VERSIONS = upsert_version_rollups_sql(
    lambda i: f"${i + 1}",
    _unnest(["text", "bigint", *["text"] * len(VERSION_DIMENSIONS),
             *["bigint"] * len(VERSION_MEASURES)]),
)


def _columns(rows: Sequence[Sequence[Any]]) -> list[list[Any]]:
    return [list(col) for col in zip(*rows, strict=True)]


_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def qmark_to_dollar(sql: str) -> str:
    """Rewrite ``?`` placeholders as ``$1, $2, ...`` (report SQL has no ``?`` literals)."""
    parts = sql.split("?")
    out = [parts[0]]
    for i, part in enumerate(parts[1:], start=1):
        out.append(f"${i}{part}")
    return "".join(out)


def split_schema(dsn: str) -> tuple[str, str | None]:
    """Take a ``schema=`` query parameter (ours, not libpq's) out of a DSN."""
    parts = urlsplit(dsn)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


async def apply_postgres_migrations(con: Any, schema: str | None = None) -> list[int]:
    applied: list[int] = []
    async with con.transaction():
        await con.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        if schema is not None:
            await con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await con.execute(SCHEMA_MIGRATIONS_DDL)
        done = {int(r["version"]) for r in await con.fetch("SELECT version FROM schema_migrations")}
        for version, statements in POSTGRES_MIGRATIONS:
            if version in done:
                continue
            for statement in statements:
                await con.execute(statement)
            await con.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
                version,
                time.time(),
            )
            applied.append(version)
    return applied


async def _init_connection(con: Any) -> None:
    await con.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} "
        "(LIKE usage_events INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
    )


class PostgresSink:
    """``LedgerSink`` over PostgreSQL (several gateway replicas share one ledger)."""

    dialect = "postgres"

    def __init__(self, dsn: str, *, schema: str | None = None, pool_size: int = 4) -> None:
        dsn, dsn_schema = split_schema(dsn)
        schema = schema if schema is not None else dsn_schema
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise ValueError(f"invalid schema name {schema!r}")
        self.dsn = dsn
        self.schema = schema
        self.pool_size = pool_size
        self._pool: Any = None
        self.applied_migrations: list[int] = []

    @classmethod
    async def open(cls, dsn: str, **options: Any) -> PostgresSink:
        sink = cls(dsn, **options)
        await sink._open()
        return sink

    def _settings(self) -> dict[str, str]:
        return {"search_path": self.schema} if self.schema else {}

    async def _open(self) -> None:
        con = await asyncpg.connect(self.dsn, server_settings=self._settings())
        try:
            self.applied_migrations = await apply_postgres_migrations(con, self.schema)
        finally:
            await con.close()
        self._pool = await asyncpg.create_pool(
            self.dsn,
            min_size=1,
            max_size=self.pool_size,
            server_settings=self._settings(),
            init=_init_connection,
        )

    @property
    def pool(self) -> Any:
        if self._pool is None:
            raise RuntimeError("postgres sink is closed")
        return self._pool

    async def write(self, batch: list[UsageEvent]) -> int:
        unique: dict[tuple[str, int], UsageEvent] = {}
        for ev in batch:  # the first of duplicates inside a batch wins, as on SQLite
            unique.setdefault(ev.key, ev)
        if not unique:
            return 0
        async with self.pool.acquire() as con, con.transaction():
            await con.copy_records_to_table(
                _STAGING,
                records=[event_row(ev) for ev in unique.values()],
                columns=list(EVENT_COLUMNS),
            )
            keys = {(r["request_id"], r["attempt"]) for r in await con.fetch(_MOVE)}
            if not keys:
                return 0
            inserted = [ev for key, ev in unique.items() if key in keys]
            await con.execute(_UPSERT_ROLLUPS, *_columns(rollup_rows(inserted)))
            fps = fingerprint_rows(inserted)
            if fps:
                await con.execute(_UPSERT_FINGERPRINTS, *_columns(fps))
            versions = version_rows(inserted)
            if versions:
                await con.execute(_UPSERT_VERSIONS, *_columns(versions))
            sessions = session_rows(inserted)
            if sessions:
                await con.execute(_UPSERT_SESSIONS, *_columns(sessions))
            await con.execute(_UPSERT_ADVICE, *_columns(advice_rows(inserted)))
            await con.execute(_UPSERT_CLIENTS, *_columns(client_rows(inserted)))
            return len(inserted)

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        async with self.pool.acquire() as con:
            rows = await con.fetch(qmark_to_dollar(sql), *params)
        return [dict(r) for r in rows]

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        async with self.pool.acquire() as con:
            status: str = await con.execute(qmark_to_dollar(sql), *params)
        last = status.rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def record_price_table(self, version: str, currency: str, table: bytes) -> None:
        async with self.pool.acquire() as con:
            await con.execute(
                "INSERT INTO price_versions (version, currency, price_table, first_seen) "
                "VALUES ($1, $2, $3, $4) ON CONFLICT (version) DO NOTHING",
                version,
                currency,
                table.decode(),
                time.time(),
            )

    async def migrate_again(self) -> list[int]:
        async with self.pool.acquire() as con:
            return await apply_postgres_migrations(con, self.schema)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
