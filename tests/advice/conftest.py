"""Fixtures of the advisor tests: a ledger target for each backend."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.services import fresh_pg_schema


@pytest.fixture(params=["sqlite", "postgres"])
def sink_target(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A SQLite path, or a PostgreSQL DSN with a schema of its own."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    with fresh_pg_schema("advice") as url:
        yield url
