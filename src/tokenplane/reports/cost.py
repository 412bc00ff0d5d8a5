"""The cost report's figures, from rollup rows (pure: rows and prices in, figures out).

Rows are what ``metering.reports.usage_report`` returns: sums per group with
``cost_micros``, tokens by kind and by source. Money stays in integer micros until it
is shown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tokenplane.reports.month import Month

SOURCES = ("system", "history", "context", "tools", "user")
DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Line:
    """One tenant's department/app: this month and last month."""

    tenant: str
    department: str
    app: str
    requests: int
    input_tokens: int
    output_tokens: int
    by_source: Mapping[str, int]
    cost_micros: int
    last_cost_micros: int

    @property
    def change_micros(self) -> int:
        return self.cost_micros - self.last_cost_micros


@dataclass(frozen=True, slots=True)
class Forecast:
    """Month-end cost. ``basis``: ``actual`` (the month is over), or ``run-rate``: the
    month so far plus the remaining days at the daily average of the last (up to)
    seven complete days."""

    basis: str
    month_end_micros: int
    daily_rate_micros: int
    days_elapsed: float


@dataclass(frozen=True, slots=True)
class Saving:
    what: str
    tokens: int
    micros: int | None  # None: no price to value it at
    note: str = ""


@dataclass(frozen=True, slots=True)
class ClientLine:
    """One API (``OpenAI Chat``, ``Anthropic Messages``, ...) and client (None: the
    requests named none) over the month, every currency summed as the lines are."""

    api: str
    client: str | None
    requests: int
    input_tokens: int
    output_tokens: int
    cost_micros: int
    token_share: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class CostReport:
    month: Month
    tenant: str | None
    currency: str
    lines: tuple[Line, ...]
    total_micros: int
    last_total_micros: int
    daily: tuple[tuple[str, int], ...]  # (ISO day, cost micros) of this month
    forecast: Forecast
    drivers: tuple[Line, ...]
    savings: tuple[Saving, ...]
    totals: Mapping[str, int] = field(default_factory=dict)
    clients: tuple[ClientLine, ...] = ()  # by API and client (empty before ledger v11)

    @property
    def change_share(self) -> float | None:
        if self.last_total_micros == 0:
            return None
        return (self.total_micros - self.last_total_micros) / self.last_total_micros


def _i(row: Mapping[str, Any], key: str) -> int:
    return int(row.get(key) or 0)


def _key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(row.get("tenant") or ""), str(row.get("department") or ""),
            str(row.get("app") or ""))


def lines(this: Sequence[Mapping[str, Any]], last: Sequence[Mapping[str, Any]]) -> list[Line]:
    """Tenant/department/app lines of this month, with last month's cost beside them (a
    line only last month had appears with zero use this month: its spend went away)."""
    before: dict[tuple[str, str, str], int] = {}
    for r in last:
        k = _key(r)
        before[k] = before.get(k, 0) + _i(r, "cost_micros")
    out: dict[tuple[str, str, str], Line] = {}
    for r in this:
        k = _key(r)
        prev = out.get(k)
        src = {s: _i(r, f"input_{s}") + (prev.by_source[s] if prev else 0) for s in SOURCES}
        out[k] = Line(k[0], k[1], k[2],
                      _i(r, "requests") + (prev.requests if prev else 0),
                      _i(r, "input_tokens") + (prev.input_tokens if prev else 0),
                      _i(r, "output_tokens") + (prev.output_tokens if prev else 0),
                      src, _i(r, "cost_micros") + (prev.cost_micros if prev else 0),
                      before.get(k, 0))
    for k, cost in before.items():
        if k not in out:
            out[k] = Line(k[0], k[1], k[2], 0, 0, 0, dict.fromkeys(SOURCES, 0), 0, cost)
    return sorted(out.values(),
                  key=lambda ln: (-ln.cost_micros, ln.tenant, ln.department, ln.app))


def client_lines(rows: Sequence[Mapping[str, Any]]) -> list[ClientLine]:
    """API and client lines from ``metering.client_reports.client_report`` rows (one
    per currency merged), the most tokens first, with their share of the tokens."""
    acc: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        k = (str(r.get("api") or ""), str(r.get("client") or ""))
        cur = acc.setdefault(k, [0, 0, 0, 0])
        for i, m in enumerate(("requests", "input_tokens", "output_tokens", "cost_micros")):
            cur[i] += _i(r, m)
    total = sum(v[1] + v[2] for v in acc.values())
    out = [ClientLine(api, client or None, v[0], v[1], v[2], v[3],
                      (v[1] + v[2]) / total if total else 0.0)
           for (api, client), v in acc.items()]
    return sorted(out, key=lambda c: (-c.tokens, -c.requests, c.api, c.client or ""))


def forecast(month: Month, daily: Sequence[tuple[str, int]], now: float) -> Forecast:
    """Month-end cost (see :class:`Forecast`)."""
    total = sum(c for _, c in daily)
    if now >= month.end:
        return Forecast("actual", total, round(total / month.days), float(month.days))
    elapsed = max(0.0, (now - month.start) / DAY_S)
    complete = int(elapsed)
    by_day = dict(daily)
    days = [day_of(month, d) for d in range(max(0, complete - 7), complete)]
    recent = [by_day.get(d, 0) for d in days]
    rate = round(sum(recent) / len(recent)) if recent else (
        round(total / elapsed) if elapsed > 0 else 0)
    return Forecast("run-rate", total + round(rate * (month.days - elapsed)), rate, elapsed)


def day_of(month: Month, index: int) -> str:
    """The ISO date of the month's day ``index`` (0-based)."""
    return f"{month}-{index + 1:02d}"


def drivers(all_lines: Sequence[Line], n: int = 5) -> list[Line]:
    """The lines that moved the total most, up or down."""
    moved = [ln for ln in all_lines if ln.change_micros != 0]
    return sorted(moved, key=lambda ln: (-abs(ln.change_micros), ln.tenant, ln.department,
                                         ln.app))[:n]


def prefix_cache_saving(by_model: Sequence[Mapping[str, Any]],
                        prices: Mapping[str, tuple[Decimal, Decimal]]) -> Saving:
    """Prompt tokens read from a prefix cache, valued at what they would have cost as
    plain input: ``cached x (input - cached_input)`` per 1M tokens, per model (base
    tier prices; a model without prices is counted in tokens only)."""
    tokens = 0
    micros = 0
    unpriced: list[str] = []
    for r in by_model:
        cached = _i(r, "cached_input_tokens")
        if not cached:
            continue
        tokens += cached
        p = prices.get(str(r.get("model") or ""))
        if p is None:
            unpriced.append(str(r.get("model") or "?"))
            continue
        full, cached_price = p
        micros += int((Decimal(cached) * (full - cached_price)).to_integral_value())
    note = f"no prices for {', '.join(sorted(set(unpriced)))}" if unpriced else ""
    return Saving("prefix caching", tokens, micros, note)


CENT_MICROS = 10_000


def money(micros: int | None, *, signed: bool = False) -> str:
    """An amount with the precision that shows it: cents from a cent up (``1,234.57``);
    below a cent three significant digits, down to the micro-unit the ledger keeps
    (``0.00285``, ``0.000012``), so a small spend never reads ``0.00``. ``signed``: a
    change, with its ``+``."""
    if micros is None:
        return "-"
    amount = Decimal(micros).scaleb(-6)
    sign = "+" if signed and micros > 0 else ""
    if micros == 0 or abs(micros) >= CENT_MICROS:
        return f"{sign}{amount.quantize(Decimal('0.01')):,}"
    places = min(6, 2 - amount.adjusted())
    return f"{sign}{amount.quantize(Decimal(1).scaleb(-places)):f}"
