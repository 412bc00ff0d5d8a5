"""Calendar windows are exact UTC days, ISO weeks, months and fixed dates."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenplane.admission.periods import FOREVER_MS, Period

INSTANTS = st.integers(min_value=0, max_value=4_000_000_000_000).map(lambda ms: ms / 1000)


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


@given(INSTANTS)
def test_daily_window_is_the_utc_day(now: float) -> None:
    w = Period("daily").window(now)
    start = _utc(w.start_ms)
    assert w.start_ms <= int(now * 1000) < w.end_ms
    assert (start.hour, start.minute, start.second) == (0, 0, 0)
    assert w.end_ms - w.start_ms == 86_400_000
    assert Period("daily").window(w.end_ms / 1000).id == w.id + 1


@given(INSTANTS)
def test_weekly_window_is_the_iso_week(now: float) -> None:
    w = Period("weekly").window(now)
    start = _utc(w.start_ms)
    assert w.start_ms <= int(now * 1000) < w.end_ms
    assert start.isoweekday() == 1 and start.hour == 0
    assert _utc(int(now * 1000)).isocalendar()[1] == start.isocalendar()[1]
    assert Period("weekly").window(w.end_ms / 1000).id == w.id + 1


@given(INSTANTS)
def test_monthly_window_is_the_calendar_month(now: float) -> None:
    w = Period("monthly").window(now)
    start, end, at = _utc(w.start_ms), _utc(w.end_ms), _utc(int(now * 1000))
    assert w.start_ms <= int(now * 1000) < w.end_ms
    assert (start.year, start.month, start.day, start.hour) == (at.year, at.month, 1, 0)
    assert end.day == 1 and (end.month - start.month) % 12 == 1
    assert Period("monthly").window(w.end_ms / 1000 - 0.001).id == w.id
    assert Period("monthly").window(w.end_ms / 1000).id == w.id + 1


def test_fixed_dates_reset_exactly_and_then_never() -> None:
    p = Period("fixed", resets_at=(1000.0, 2000.0))
    assert p.window(999.999).id == 0 and p.window(999.999).end_ms == 1_000_000
    assert p.window(1000.0).id == 1 and p.window(1999.0).end_ms == 2_000_000
    last = p.window(5000.0)
    assert last.id == 2 and last.end_ms == FOREVER_MS


@pytest.mark.parametrize(
    ("kind", "resets"),
    [("fixed", ()), ("fixed", (2.0, 1.0)), ("daily", (1.0,)), ("hourly", ())],
)
def test_bad_periods_are_refused(kind: str, resets: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        Period(kind, resets_at=resets)  # type: ignore[arg-type]
