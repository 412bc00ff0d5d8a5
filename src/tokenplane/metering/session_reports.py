"""Session reports: one session's waterfall (its steps, from the ledger's events) and
the costliest sessions (from the ``session_rollups`` table)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson

from tokenplane.metering.reports import TimeBound, _epoch
from tokenplane.metering.stores.base import LedgerSink

SESSION_ORDERS = ("cost", "tokens", "steps", "recent")
_SOURCES = ("system", "history", "context", "tools", "user")
_EVENT_FIELDS = (
    "request_id, attempt, tenant, app, model, status, error_code, arrival_ts, ts, "
    "last_token_ts, session_step, input_system, input_history, input_context, input_tools, "
    "input_user, input_tokens, cached_input_tokens, output_tokens, reasoning_tokens, "
    "tool_calls, tool_output_tokens, tool_output_added, tool_output_removed, cost_micros, "
    "currency, flags"
)


def _cost(micros: int) -> str:
    return str(Decimal(int(micros)).scaleb(-6))


def _flags(raw: Any) -> list[str]:
    if isinstance(raw, str | bytes) and raw:
        loaded = orjson.loads(raw)
        return [str(f) for f in loaded] if isinstance(loaded, list) else []
    return []


def step_row(ev: dict[str, Any]) -> dict[str, Any]:
    """One waterfall row from one ledger event."""
    start = ev.get("arrival_ts")
    end = ev.get("last_token_ts") or ev.get("ts")
    latency = round((end - start) * 1000, 1) if start is not None and end is not None else None
    row: dict[str, Any] = {"step": ev.get("session_step"), "request_id": ev["request_id"],
                           "attempt": int(ev["attempt"]), "status": ev["status"],
                           "model": ev["model"], "input_tokens": int(ev["input_tokens"])}
    for s in _SOURCES:
        row[s] = int(ev[f"input_{s}"])
    row.update(
        cached=int(ev["cached_input_tokens"]),
        tool_output_tokens=int(ev["tool_output_tokens"]),
        tool_output_added=int(ev["tool_output_added"]),
        tool_output_removed=int(ev["tool_output_removed"]),
        output_tokens=int(ev["output_tokens"]),
        tool_calls=int(ev["tool_calls"]),
        latency_ms=latency,
        cost_micros=int(ev["cost_micros"]),
        cost=_cost(ev["cost_micros"]),
        flags=",".join(f for f in _flags(ev.get("flags"))
                       if f.startswith(("tool_output", "context_growth"))),
    )
    return row


async def session_events(sink: LedgerSink, session_id: str,
                         tenant: str | None) -> list[dict[str, Any]]:
    clauses, params = ["session_id = ?"], [session_id]
    if tenant is not None:
        clauses.append("tenant = ?")
        params.append(tenant)
    sql = (f"SELECT {_EVENT_FIELDS} FROM usage_events WHERE {' AND '.join(clauses)} "
           "ORDER BY session_step, arrival_ts, attempt")
    return await sink.fetch(sql, params)


def waterfall(session_id: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The session's steps in order, and their totals. ``events`` all of one tenant."""
    steps = [step_row(ev) for ev in events]
    total: dict[str, Any] = {"steps": len({(s["step"], s["request_id"]) for s in steps})}
    for name in ("input_tokens", *_SOURCES, "cached", "tool_output_added",
                 "tool_output_removed", "output_tokens", "tool_calls", "cost_micros"):
        total[name] = sum(int(s[name]) for s in steps)
    total["total_tokens"] = total["input_tokens"] + total["output_tokens"]
    total["cost"] = _cost(total["cost_micros"])
    first = events[0] if events else {}
    return {"object": "session", "id": session_id, "tenant": first.get("tenant"),
            "app": first.get("app"), "currency": first.get("currency"),
            "steps": steps, "total": total}


async def session_report(sink: LedgerSink, session_id: str,
                         tenant: str | None) -> list[dict[str, Any]]:
    """The waterfall of ``session_id``: one per tenant that used this id (a tenant's key
    names its own tenant, so it finds at most its own)."""
    events = await session_events(sink, session_id, tenant)
    by_tenant: dict[str, list[dict[str, Any]]] = {}
    for ev in events:
        by_tenant.setdefault(ev["tenant"], []).append(ev)
    return [waterfall(session_id, evs) for _, evs in sorted(by_tenant.items())]


async def costliest_sessions(sink: LedgerSink, tenant: str | None = None,
                             since: TimeBound = None, until: TimeBound = None,
                             limit: int = 20, order: str = "cost") -> list[dict[str, Any]]:
    """The sessions with the most cost (or tokens, steps; or the most recent) whose last
    step falls in [since, until)."""
    if order not in SESSION_ORDERS:
        raise ValueError(f"order must be one of {', '.join(SESSION_ORDERS)}")
    clauses: list[str] = ["1 = 1"]
    params: list[Any] = []
    lo, hi = _epoch(since), _epoch(until)
    if lo is not None:
        clauses.append("last_ts >= ?")
        params.append(lo)
    if hi is not None:
        clauses.append("last_ts < ?")
        params.append(hi)
    if tenant is not None:
        clauses.append("tenant = ?")
        params.append(tenant)
    key = {"cost": "cost_micros DESC", "tokens": "(input_tokens + output_tokens) DESC",
           "steps": "steps DESC", "recent": "last_ts DESC"}[order]
    sql = ("SELECT tenant, session_id, app, currency, steps, requests, errors, max_step, "
           "input_tokens, output_tokens, tool_output_added, tool_calls, cost_micros, "
           f"first_ts, last_ts FROM session_rollups WHERE {' AND '.join(clauses)} "
           f"ORDER BY {key}, tenant, session_id LIMIT ?")
    out = []
    for raw in await sink.fetch(sql, [*params, limit]):
        row = {k: (int(v) if isinstance(v, Decimal) else v) for k, v in raw.items()}
        row["total_tokens"] = int(row["input_tokens"]) + int(row["output_tokens"])
        row["cost"] = _cost(row["cost_micros"])
        out.append(row)
    return out
