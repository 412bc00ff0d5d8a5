"""``open_sink``: the ledger sink a target names (a PostgreSQL URL or a SQLite path)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tokenplane.metering.stores.base import LedgerSink


def is_postgres_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


async def open_sink(target: str | os.PathLike[str], **options: Any) -> LedgerSink:
    """``postgresql://...`` opens PostgreSQL; anything else is a SQLite file path.

    Migrations are applied before the sink is returned.
    """
    text = os.fspath(target)
    if is_postgres_url(text):
        from tokenplane.metering.stores.postgres import PostgresSink

        return await PostgresSink.open(text, **options)
    from tokenplane.metering.stores.sqlite import SqliteSink

    return await SqliteSink.open(Path(text), **options)
