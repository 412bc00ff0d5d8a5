"""Reads what the reports show: the ledger's rollups (cost) and the audit log (compliance).

The cost figures come from ``metering.reports.usage_report`` -- the rollups the
``tokenplane usage`` command and ``GET /admin/v1/usage`` read -- so a report's numbers
are theirs for the same month."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from tokenplane.governance.audit.multi import log_dirs, matching
from tokenplane.governance.audit.segments import iter_records
from tokenplane.governance.audit.signing import Verifier
from tokenplane.governance.audit.verify import VerifyResult, verify
from tokenplane.metering.client_reports import client_report
from tokenplane.metering.outcomes import OUTCOMES
from tokenplane.metering.reports import usage_report
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.reports.compliance import ComplianceCounts, count
from tokenplane.reports.cost import (
    CostReport,
    client_lines,
    drivers,
    forecast,
    lines,
    prefix_cache_saving,
)
from tokenplane.reports.month import Month

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


async def gather_cost(
    sink: LedgerSink, month: Month, tenant: str | None, *, now: float | None = None,
    prices: Mapping[str, tuple[Decimal, Decimal]] | None = None,
    progress: Progress = _quiet,
) -> CostReport:
    """The cost report of ``month`` (one tenant's, or every tenant's)."""
    now = time.time() if now is None else now
    last = month.previous()
    by = ["tenant", "department", "app"]
    progress(f"reading {month} by tenant, department and app")
    this_rows = await usage_report(sink, by, month.start, month.end, tenant)
    progress(f"reading {last}")
    last_rows = await usage_report(sink, by, last.start, last.end, tenant)
    progress("reading days and models")
    day_rows = await usage_report(sink, ["day"], month.start, month.end, tenant)
    model_rows = await usage_report(sink, ["model"], month.start, month.end, tenant)
    progress("reading APIs and clients")
    client_rows = await client_report(sink, month.start, month.end, tenant)
    daily = tuple(sorted((str(r["day"]), int(r["cost_micros"] or 0)) for r in day_rows))
    all_lines = lines(this_rows, last_rows)
    currencies = {str(r.get("currency") or "") for r in this_rows + last_rows} - {""}
    totals = {k: sum(int(r.get(k) or 0) for r in this_rows)
              for k in ("requests", "input_tokens", "cached_input_tokens", "output_tokens",
                        "refused", *OUTCOMES)}
    return CostReport(
        month, tenant, ", ".join(sorted(currencies)) or "USD", tuple(all_lines),
        sum(ln.cost_micros for ln in all_lines), sum(ln.last_cost_micros for ln in all_lines),
        daily, forecast(month, daily, now), tuple(drivers(all_lines)),
        (prefix_cache_saving(model_rows, prices or {}),), totals,
        tuple(client_lines(client_rows)),
    )


@dataclass(frozen=True, slots=True)
class LogState:
    """One audit log (a worker's directory): its verification and what it still holds."""

    name: str
    result: VerifyResult | None  # None: not verified (no key)
    oldest_day: str | None
    newest_day: str | None


@dataclass(frozen=True, slots=True)
class ComplianceReport:
    month: Month
    tenant: str | None
    counts: ComplianceCounts
    logs: tuple[LogState, ...]
    retention: str
    retention_days: float
    key_note: str  # how the chains were verified, or why not


def _days(directory: Path) -> tuple[str | None, str | None]:
    first = last = None
    for rec in iter_records(directory):
        ts = rec.get("ts")
        if isinstance(ts, int | float):
            day = time.strftime("%Y-%m-%d", time.gmtime(ts))
            first = day if first is None or day < first else first
            last = day if last is None or day > last else last
    return first, last


def gather_compliance(
    audit_root: Path, month: Month, tenant: str | None, *, verifier: Verifier | None,
    key_note: str, retention: str, retention_days: float, progress: Progress = _quiet,
) -> ComplianceReport:
    """Counts over the month's request records (one tenant's, or all), and every log's
    chain verification and span."""
    progress(f"reading the audit log for {month}")
    counts = count(matching(audit_root, tenant=tenant, since=month.start, until=month.end))
    logs = []
    for d in log_dirs(audit_root):
        progress(f"verifying {d.name}")
        result = verify(d, verifier) if verifier is not None else None
        first, last = _days(d)
        logs.append(LogState(d.name, result, first, last))
    return ComplianceReport(month, tenant, counts, tuple(logs), retention, retention_days,
                            key_note)
