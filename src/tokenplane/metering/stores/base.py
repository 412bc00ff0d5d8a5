"""The ledger sink interface and the row conversion shared by sinks.

A sink stores usage events idempotently on ``(request_id, attempt)`` and maintains
the rollups in the same transaction, for the rows it actually inserted. Sinks also
answer read-only report queries (``fetch``) written with ``?`` placeholders.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any, Protocol, runtime_checkable

import orjson

from tokenplane.metering.events import EVENT_COLUMNS, UsageEvent, event_from_dict


@runtime_checkable
class LedgerSink(Protocol):
    dialect: str  # "sqlite" | "postgres"

    async def write(self, batch: list[UsageEvent]) -> int:
        """Insert the events not yet present; returns how many rows were inserted."""
        ...

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run a read-only query (``?`` placeholders); rows as dicts."""
        ...

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one maintenance statement (``?`` placeholders); rows affected."""
        ...

    async def record_price_table(self, version: str, currency: str, table: bytes) -> None:
        """Keep the price table of a version (first write wins), for audits."""
        ...

    async def close(self) -> None: ...


def event_row(event: UsageEvent) -> tuple[Any, ...]:
    """Values in ``EVENT_COLUMNS`` order; flags stored as a JSON array text."""
    row = _GET_ROW(event)
    return (*row[:_FLAGS_INDEX], orjson.dumps(event.flags).decode(), *row[_FLAGS_INDEX + 1 :])


def row_event(row: dict[str, Any]) -> UsageEvent:
    """Inverse of ``event_row`` for a row read back as a dict."""
    data = dict(row)
    flags = data.get("flags")
    data["flags"] = orjson.loads(flags) if isinstance(flags, str | bytes) and flags else []
    data["stream"] = bool(data.get("stream"))
    return event_from_dict(data)


_FLAGS_INDEX = EVENT_COLUMNS.index("flags")
_GET_ROW = attrgetter(*EVENT_COLUMNS)
