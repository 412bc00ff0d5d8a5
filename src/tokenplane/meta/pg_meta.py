"""Metadata (tenants, departments, apps, keys, limits, console sign-outs) in PostgreSQL.

Chosen when ``TOKENPLANE_DATABASE_URL`` is a ``postgresql://`` URL, so that gateway
replicas on different machines share keys and limits. asyncpg is asynchronous
while the key and limit stores are synchronous (the event loop and the CLI call
them), so :class:`PgMeta` runs one asyncpg connection on a private event loop in a
daemon thread; the synchronous calls wait on it. Only administration waits: the
request path reads the in-memory tables the stores keep.

Every write bumps the one-row ``meta_version`` counter in the same transaction.
The thread polls that counter every ``poll_s`` (0.5 s) and, when it moved, runs
the registered loaders, which swap the stores' in-memory tables; a process's own
writes are loaded at once. A change made anywhere is in effect everywhere within
``poll_s`` plus one load.

The tables are created by versioned migrations (``meta_migrations``), applied
under a transaction-scoped advisory lock so racing processes run each once. A
``schema=`` query parameter in the URL (ours, as for the ledger) selects a schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import asyncpg

from tokenplane.metering.stores.postgres import split_schema

log = logging.getLogger(__name__)
T = TypeVar("T")
Loader = Callable[[Any], Awaitable[None]]
Statement = tuple[str, Sequence[Any]]

_LOCK_ID = 7_231_404_551
META_MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        "CREATE TABLE tenants (name text PRIMARY KEY, created_at double precision NOT NULL)",
        "CREATE TABLE departments (tenant text NOT NULL, name text NOT NULL,"
        " created_at double precision NOT NULL, PRIMARY KEY (tenant, name))",
        "CREATE TABLE apps (tenant text NOT NULL, department text NOT NULL DEFAULT '',"
        " name text NOT NULL, created_at double precision NOT NULL,"
        " PRIMARY KEY (tenant, department, name))",
        "CREATE TABLE api_keys (id text PRIMARY KEY, hash text NOT NULL UNIQUE,"
        " prefix text NOT NULL, tenant text NOT NULL, department text, app text, name text,"
        " admin boolean NOT NULL DEFAULT false, created_at double precision NOT NULL,"
        " revoked_at double precision)",
        "CREATE TABLE limits (tenant text NOT NULL, department text NOT NULL DEFAULT '',"
        " app text NOT NULL DEFAULT '', key_id text NOT NULL DEFAULT '',"
        " end_user text NOT NULL DEFAULT '', model text NOT NULL DEFAULT '',"
        " spec text NOT NULL, updated_at double precision NOT NULL,"
        " PRIMARY KEY (tenant, department, app, key_id, end_user, model))",
        "CREATE TABLE meta_version (id int PRIMARY KEY, version bigint NOT NULL)",
        "INSERT INTO meta_version VALUES (1, 0)",
    )),
    (2, (  # console sessions ended by signing out (until their cookie's expiry)
        "CREATE TABLE console_signouts (sid text PRIMARY KEY,"
        " expires_at double precision NOT NULL)",
    )),
    # roles, expiry and last use (expand only: release N, which selects its columns by
    # name, keeps serving on a database N+1 migrated)
    (3, (
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS role text",
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS expires_at double precision",
        "ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS last_used_at double precision",
    )),
)


def is_postgres_url(url: str | None) -> bool:
    return bool(url) and str(url).startswith(("postgresql://", "postgres://"))


def rowcount(status: str) -> int:
    """The row count of an asyncpg command status (``"UPDATE 3"`` -> 3)."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


async def apply_meta_migrations(con: Any, schema: str | None) -> list[int]:
    applied: list[int] = []
    async with con.transaction():
        await con.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_ID)
        if schema is not None:
            await con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        await con.execute("CREATE TABLE IF NOT EXISTS meta_migrations ("
                          "version int PRIMARY KEY, applied_at double precision NOT NULL)")
        done = {int(r[0]) for r in await con.fetch("SELECT version FROM meta_migrations")}
        for version, statements in META_MIGRATIONS:
            if version in done:
                continue
            for statement in statements:
                await con.execute(statement)
            await con.execute("INSERT INTO meta_migrations VALUES ($1, $2)", version, time.time())
            applied.append(version)
    return applied


class PgMeta:
    """One PostgreSQL connection on a private loop, the version poll and the loaders."""

    def __init__(self, url: str, *, poll_s: float = 0.5, timeout_s: float = 30.0) -> None:
        dsn, schema = split_schema(url)
        self._target = (dsn, schema)
        if schema is not None and not schema.replace("_", "").isalnum():
            raise ValueError(f"invalid schema name {schema!r}")
        self.poll_s = poll_s
        self.timeout_s = timeout_s
        self.loaded_version = -1
        self._loaders: list[Loader] = []
        self._cond = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pg-meta",
                                        daemon=True)
        self._thread.start()
        self._users = 1
        self._closed = False
        try:
            self._con: Any = self._call(self._open(dsn, schema))
        except BaseException:
            self._stop()
            raise
        self._alock = asyncio.Lock()
        self._poller: asyncio.Task[None] = self._call(self._start_poll())

    async def _start_poll(self) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self._poll())

    async def _shutdown(self) -> None:
        self._poller.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._poller
        await self._con.close()

    async def _open(self, dsn: str, schema: str | None) -> Any:
        settings = {"search_path": schema} if schema else {}
        con = await asyncpg.connect(dsn, server_settings=settings, timeout=self.timeout_s)
        try:
            await apply_meta_migrations(con, schema)
        except BaseException:
            await con.close()
            raise
        return con

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout_s)

    # --- loaders ------------------------------------------------------------------
    def on_change(self, loader: Loader) -> None:
        """Register ``loader(connection)``; it runs now and after every change."""
        self._loaders.append(loader)
        self._call(self._guarded(loader))

    async def _guarded(self, loader: Loader) -> None:
        async with self._alock:
            await loader(self._con)

    async def _reload(self) -> None:
        """Run every loader if the version moved (caller holds the lock)."""
        row = await self._con.fetchrow("SELECT version FROM meta_version WHERE id = 1")
        version = int(row[0])
        if version == self.loaded_version:
            return
        for loader in self._loaders:
            await loader(self._con)
        with self._cond:
            self.loaded_version = version
            self._cond.notify_all()

    async def _poll(self) -> None:
        while True:
            try:
                async with self._alock:
                    if self._con.is_closed():
                        self._con = await self._open(*self._target)
                    await self._reload()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("metadata reload from PostgreSQL failed (the last tables stay in"
                            " use; retrying every %.1f s): %s", self.poll_s, exc)
            await asyncio.sleep(self.poll_s)

    def wait_loaded(self, version: int, timeout: float) -> bool:
        """Block until this process has loaded ``version`` (or later)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.loaded_version >= version, timeout)

    # --- statements ---------------------------------------------------------------
    def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        async def go() -> list[tuple[Any, ...]]:
            async with self._alock:
                return [tuple(r) for r in await self._con.fetch(sql, *args)]
        return self._call(go())

    def write(self, statements: Sequence[Statement]) -> list[int]:
        """Run the statements in one transaction with a version bump, then reload;
        returns each statement's row count."""
        async def go() -> list[int]:
            async with self._alock:
                counts: list[int] = []
                async with self._con.transaction():
                    for sql, args in statements:
                        counts.append(rowcount(await self._con.execute(sql, *args)))
                    await self._con.execute(
                        "UPDATE meta_version SET version = version + 1 WHERE id = 1")
                await self._reload()
                return counts
        return self._call(go())

    # --- lifetime -----------------------------------------------------------------
    def share(self) -> PgMeta:
        """Another owner of this connection; each owner calls :meth:`close`."""
        self._users += 1
        return self

    def close(self) -> None:
        self._users -= 1
        if self._users > 0 or self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError,
                                 TimeoutError):
            self._call(self._shutdown())
        self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()
