"""Fixtures for the metering tests: a throwaway PostgreSQL schema, and a ledger target
for each backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.services import fresh_pg_schema


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A DSN whose ``schema=`` points at a fresh schema, dropped after the test."""
    with fresh_pg_schema("meter") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def sink_target(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A ledger target for each backend: a SQLite path, or a PostgreSQL DSN+schema."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    yield request.getfixturevalue("pg_url")
