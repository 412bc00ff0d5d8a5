"""Times and durations as a person reads them: ``2027-01-01 00:00 UTC``, ``in 24 days``,
``30 days``. Pure (values in, text out): admission's refusals, the CLI's tables and
the reports use the same words."""

from __future__ import annotations

import math
from datetime import UTC, datetime

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0


def utc_minute(ts: float) -> str:
    """``2027-01-01 00:00 UTC``: a reset or a deadline, to the minute."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def utc_iso(ts: float) -> str:
    """``2026-12-07T18:30:05Z``: an instant in a table, to the second."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def duration(seconds: float) -> str:
    """A span in the largest units that keep it readable: ``45 s``, ``12 min``,
    ``5 h 20 min``, ``24 days`` (whole days from two days up), ``250 ms`` below a
    second."""
    s = max(0.0, float(seconds))
    if not math.isfinite(s):
        return "forever"
    if s < 1:
        return f"{math.ceil(s * 1000)} ms" if s else "0 s"
    if s < 90:
        return f"{s:.3g} s" if s != int(s) and s < 10 else f"{round(s)} s"
    if s < HOUR:
        return f"{round(s / MINUTE)} min"
    if s < 2 * DAY:
        hours, rest = divmod(round(s / MINUTE), 60)
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days = s / DAY
    if days == int(days) or days >= 10:
        return _plural(round(days), "day")
    whole = int(days)
    hours = round((s - whole * DAY) / HOUR)
    return f"{_plural(whole, 'day')} {hours} h" if hours else _plural(whole, "day")
