"""Which evaluator sends the SLO alerts: one leader among every worker and replica.

- PostgreSQL configured (``database_url``): a session-level advisory lock, held on a
  connection of its own; whoever holds it leads until that connection goes.
- else Redis configured (``redis_url``): ``SET key token NX PX ttl``, renewed by the
  leader each round (compare-and-expire), so a dead leader's lock lapses in ``ttl``.
- else: an ``flock`` on ``<data dir>/slo-leader/lock``, which the workers of one
  host share (a process that dies releases it).

``acquire`` is called each evaluation round: it keeps (renews) the lead or tries to
take it, and says whether this process leads now.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
from pathlib import Path
from typing import Any, Protocol

import asyncpg
import redis.asyncio as aioredis

from tokenplane.metering.journal.files import WriterLock
from tokenplane.metering.stores.open import is_postgres_url
from tokenplane.metering.stores.postgres import split_schema

log = logging.getLogger("tokenplane.slo")

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0
"""


class Leadership(Protocol):
    async def acquire(self) -> bool: ...

    async def release(self) -> None: ...


class FileLeader:
    """The lead among one host's workers: the journal's own ``WriterLock`` (an
    ``flock`` the kernel drops with its process) on ``<dir>/lock``."""

    def __init__(self, lock_dir: Path) -> None:
        self.lock = WriterLock(lock_dir)

    async def acquire(self) -> bool:
        return self.lock.try_acquire()

    async def release(self) -> None:
        self.lock.release()


def advisory_key(name: str) -> int:
    """A signed 64-bit lock id for ``name`` (PostgreSQL's advisory lock space)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class PgLeader:
    def __init__(self, dsn: str, schema: str | None, name: str = "slo") -> None:
        self.dsn = dsn
        self.key = advisory_key(f"tokenplane-{name}-leader:{schema or 'public'}")
        self._con: Any = None

    async def acquire(self) -> bool:
        if self._con is not None:
            try:
                await self._con.fetchval("SELECT 1")
                return True
            except Exception:  # the connection, and with it the lock, is gone
                log.warning("lost the PostgreSQL connection holding the SLO alert lead")
                await self.release()
        con = await asyncpg.connect(self.dsn)
        try:
            if await con.fetchval("SELECT pg_try_advisory_lock($1)", self.key):
                self._con, con = con, None
                return True
            return False
        finally:
            if con is not None:
                await con.close()

    async def release(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            with contextlib.suppress(Exception):
                await con.close()


class RedisLeader:
    def __init__(self, url: str, key: str, ttl_s: float) -> None:
        self.url = url
        self.key = key
        self.ttl_ms = max(1000, int(ttl_s * 1000))
        self.token = secrets.token_hex(16)
        self._client: Any = None

    async def acquire(self) -> bool:
        if self._client is None:
            self._client = aioredis.from_url(self.url)
        got = await self._client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms)
        return bool(got)

    async def release(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.eval(
                    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                    "return redis.call('DEL', KEYS[1]) end return 0", 1, self.key, self.token)
            await client.aclose()


def open_leadership(
    home: Path, database_url: str | None, redis_url: str | None, redis_prefix: str,
    interval_s: float, name: str = "slo",
) -> Leadership:
    """The election of ``name`` (``slo``: SLO alerts; ``autoscale``: the autoscaler's
    actuation), each with a lock of its own."""
    if database_url and is_postgres_url(database_url):
        dsn, schema = split_schema(database_url)
        return PgLeader(dsn, schema, name)
    if redis_url:
        return RedisLeader(redis_url, f"{redis_prefix}{name}:leader", 3 * interval_s)
    return FileLeader(home / f"{name}-leader")
