"""Calendar bounds the pages use (UTC, like the rollups' buckets)."""

from __future__ import annotations

from datetime import UTC, datetime

DAY = 86400
HOUR = 3600


def day_start(now: float) -> int:
    return int(now) // DAY * DAY


def month_start(now: float) -> int:
    d = datetime.fromtimestamp(now, UTC)
    return int(datetime(d.year, d.month, 1, tzinfo=UTC).timestamp())


def next_month_start(now: float) -> int:
    d = datetime.fromtimestamp(now, UTC)
    year, month = (d.year + 1, 1) if d.month == 12 else (d.year, d.month + 1)
    return int(datetime(year, month, 1, tzinfo=UTC).timestamp())


def label(bucket: int, grain: str) -> str:
    """A bucket's label on a chart or in a table: ``2026-12-01`` or ``12-01 14:00``."""
    d = datetime.fromtimestamp(bucket, UTC)
    if grain == "day":
        return d.date().isoformat()
    if grain == "hour":
        return d.strftime("%Y-%m-%d %H:00")
    if grain == "second":
        return d.strftime("%H:%M:%S")
    return d.strftime("%H:%M")
