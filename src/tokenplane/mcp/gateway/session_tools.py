"""One agent session's tool costs: its steps from the ledger, the audit records of its
time span (request records with their tool results' digests, MCP call records), joined
by ``mcp/links.py``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tokenplane.governance.audit.multi import log_dirs
from tokenplane.governance.audit.segments import iter_records
from tokenplane.mcp.links import tool_costs
from tokenplane.metering.session_reports import session_events
from tokenplane.metering.stores.base import LedgerSink

SLACK_S = 3600.0  # calls up to an hour before the first step may feed it


def _records(root: Path, since: float, until: float) -> list[dict[str, Any]]:
    first = time.strftime("%Y%m%d", time.gmtime(since))
    last = time.strftime("%Y%m%d", time.gmtime(until))
    return [r for d in log_dirs(root) for r in iter_records(d, first, last)
            if r.get("kind") in ("request", "mcp") and since <= float(r.get("ts") or 0) <= until]


async def session_tool_costs(sink: LedgerSink, audit_root: Path, session_id: str,
                             tenant: str) -> dict[str, Any]:
    events = await session_events(sink, session_id, tenant)
    if not events:
        return tool_costs(session_id, tenant, [], [])
    since = min(float(e["arrival_ts"]) for e in events) - SLACK_S
    until = max(float(e.get("ts") or e["arrival_ts"]) for e in events) + 1.0
    records = await asyncio.to_thread(_records, audit_root, since, until)
    return tool_costs(session_id, tenant, events, records)
