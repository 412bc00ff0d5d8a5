"""UTC calendar windows for periodic budgets: day, ISO week, month, fixed dates."""

from __future__ import annotations

import bisect
import calendar
from dataclasses import dataclass
from typing import Literal

PeriodKind = Literal["daily", "weekly", "monthly", "fixed"]
PERIOD_KINDS: tuple[PeriodKind, ...] = ("daily", "weekly", "monthly", "fixed")
DAY_S = 86_400
# Window end used by a fixed schedule after its last reset date: far future, still
# an exact integer of milliseconds.
FOREVER_MS = 2**53 - 1


@dataclass(frozen=True, slots=True)
class Window:
    """One calendar window: ``id`` grows by one per window, bounds are in ms."""

    id: int
    start_ms: int
    end_ms: int


@dataclass(frozen=True, slots=True)
class Period:
    """A reset schedule.

    ``daily`` resets at 00:00 UTC, ``weekly`` on Monday 00:00 UTC (ISO week),
    ``monthly`` on the first of the month 00:00 UTC, ``fixed`` at each of
    ``resets_at`` (epoch seconds, increasing); before the first date the budget
    runs in window 0, after the last one it never resets again.
    """

    kind: PeriodKind = "monthly"
    resets_at: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in PERIOD_KINDS:
            raise ValueError(f"period must be one of {PERIOD_KINDS}, got {self.kind!r}")
        if self.kind == "fixed":
            if not self.resets_at:
                raise ValueError("a fixed period needs at least one reset date (resets_at)")
            if any(b <= a for a, b in zip(self.resets_at, self.resets_at[1:], strict=False)):
                raise ValueError("resets_at must be strictly increasing")
        elif self.resets_at:
            raise ValueError(f"resets_at applies to fixed periods only, not {self.kind!r}")

    def window(self, now: float) -> Window:
        """The window that contains ``now`` (epoch seconds, UTC)."""
        now_ms = int(now * 1000)
        if self.kind == "fixed":
            marks = [int(t * 1000) for t in self.resets_at]
            idx = bisect.bisect_right(marks, now_ms)
            start = marks[idx - 1] if idx > 0 else 0
            end = marks[idx] if idx < len(marks) else FOREVER_MS
            return Window(idx, start, end)
        day = now_ms // (DAY_S * 1000)
        if self.kind == "daily":
            return Window(day, day * DAY_S * 1000, (day + 1) * DAY_S * 1000)
        if self.kind == "weekly":
            # 1970-01-01 was a Thursday; shifting by 3 days starts weeks on Monday.
            week = (day + 3) // 7
            start_day = week * 7 - 3
            return Window(week, start_day * DAY_S * 1000, (start_day + 7) * DAY_S * 1000)
        return _month_window(day)


def _month_window(day: int) -> Window:
    # Civil-from-days is exact for the proleptic Gregorian calendar.
    year, month = _civil(day)
    start = calendar.timegm((year, month, 1, 0, 0, 0, 0, 0, 0))
    ny, nm = (year + 1, 1) if month == 12 else (year, month + 1)
    end = calendar.timegm((ny, nm, 1, 0, 0, 0, 0, 0, 0))
    return Window(year * 12 + month - 1, start * 1000, end * 1000)


def _civil(day: int) -> tuple[int, int]:
    z = day + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return year, month
