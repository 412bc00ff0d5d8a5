"""Fixtures for the metering tests: event factories and a throwaway PostgreSQL schema."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import asyncpg
import pytest

T = TypeVar("T")
PG_DSN = os.environ.get("TOKENPLANE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


async def _pg_reachable() -> bool:
    try:
        con = await asyncpg.connect(PG_DSN, timeout=3)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        return False
    await con.close()
    return True


def _run_aside(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion on a private loop in another thread.

    (Sync fixtures must not touch the event loop pytest-asyncio gives the test.)
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _require_pg() -> None:
    if _run_aside(_pg_reachable()):
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL is required in CI but not reachable at {PG_DSN}")
    pytest.skip(f"PostgreSQL not reachable at {PG_DSN}")


async def _drop_schema(schema: str) -> None:
    con = await asyncpg.connect(PG_DSN)
    try:
        await con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await con.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A DSN whose ``schema=`` points at a fresh schema, dropped after the test."""
    _require_pg()
    schema = f"tp_meter_{uuid.uuid4().hex[:12]}"
    yield f"{PG_DSN}?schema={schema}"
    _run_aside(_drop_schema(schema))


@pytest.fixture(params=["sqlite", "postgres"])
def sink_target(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A ledger target for each backend: a SQLite path, or a PostgreSQL DSN+schema."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    yield request.getfixturevalue("pg_url")
