"""MCP tools (docs/MCP.md): a tool called again with the same arguments in a session
(cache it), and a tool whose result tokens mostly never reach a model (cut by
``max_result_tokens`` or never sent on by the agent)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tokenplane.advice.model import Finding, Rates, Thresholds, Window, micros

MIN_CALLS = 20  # calls of a tool (per tenant and app) before it is judged
REPEAT_SHARE = 0.2  # repeated calls / calls
UNUSED_SHARE = 0.5  # tokens that never reach a model / tokens the server returned


@dataclass(slots=True)
class ToolAggregate:
    """One tool's calls for one (tenant, app) over the window, from the audit log's MCP
    records: the allowed calls, their result tokens (as forwarded, and as the server
    returned them), the calls that repeated an earlier call of the same session with the
    same arguments and their result tokens, and, of the calls made in agent sessions,
    those whose result no later step of the session carried."""

    tenant: str
    app: str
    tool: str
    model: str  # the accounting model (its input price values the repeats)
    currency: str = ""
    calls: int = 0
    result_tokens: int = 0
    upstream_tokens: int = 0
    repeat_calls: int = 0
    repeat_tokens: int = 0
    session_calls: int = 0
    unused_calls: int = 0
    unused_tokens: int = 0


def tool_aggregates(records: Iterable[Mapping[str, Any]], tenant: str | None,
                    currency: str = "") -> list[ToolAggregate]:
    """The aggregates from audit records (the MCP gateway's ``kind: "mcp"`` and the
    requests'): repeats are calls of the same tool with the same arguments earlier in
    the same session (the agent's session, else the MCP session); a call made in an
    agent session is unused when no request record of that session carries its
    result's digests."""
    carried: dict[tuple[str, str], set[str]] = {}  # (tenant, session) -> digests
    calls: list[Mapping[str, Any]] = []
    for rec in records:
        if tenant is not None and rec.get("tenant") != tenant:
            continue
        kind = rec.get("kind")
        session = rec.get("session") or {}
        if kind == "request" and session.get("id"):
            carried.setdefault((str(rec.get("tenant")), str(session["id"])), set()).update(
                session.get("tool_results") or [])
        elif kind == "mcp" and rec.get("method") == "tools/call" \
                and rec.get("decision") == "allow":
            calls.append(rec)
    out: dict[tuple[str, str, str], ToolAggregate] = {}
    seen: set[tuple[str, str, str, str]] = set()
    for rec in sorted(calls, key=lambda r: float(r.get("ts") or 0)):
        t, app = str(rec.get("tenant")), str(rec.get("app") or "")
        tool = f"{rec.get('server')}__{rec.get('name')}"
        key = (t, app, tool)
        a = out.get(key)
        if a is None:
            a = out[key] = ToolAggregate(t, app, tool, str(rec.get("model") or ""), currency)
        tokens = rec.get("tokens") or {}
        result = int(tokens.get("result") or 0)
        a.calls += 1
        a.result_tokens += result
        a.upstream_tokens += int(tokens.get("upstream") or result)
        agent = (rec.get("session") or {}).get("id")
        where = str(agent or rec.get("mcp_session") or "")
        args = rec.get("args_digest")
        if where and args:
            mark = (t, where, tool, str(args))
            if mark in seen:
                a.repeat_calls += 1
                a.repeat_tokens += result
            seen.add(mark)
        if agent:
            a.session_calls += 1
            if not set(rec.get("result_digests") or []) & carried.get((t, str(agent)), set()):
                a.unused_calls += 1
                a.unused_tokens += result
    return sorted(out.values(), key=lambda a: (a.tenant, a.app, a.tool))


def _evidence(a: ToolAggregate, figures: dict[str, object]) -> dict[str, object]:
    return {"query": (f"audit log, kind=mcp, method=tools/call, tenant={a.tenant}, "
                      f"app={a.app}, tool={a.tool}"), "figures": figures}


def repeated_calls(aggs: Iterable[ToolAggregate], rates: Callable[[str], Rates],
                   window: Window, th: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for a in aggs:
        if a.calls < MIN_CALLS or not a.repeat_calls:
            continue
        share = a.repeat_calls / a.calls
        tokens = int(window.per_month(a.repeat_tokens))
        if share < REPEAT_SHARE or tokens < th.min_tokens_per_month:
            continue
        out.append(Finding(
            kind="tool_repeat_calls", tenant=a.tenant, app=a.app, model=a.model,
            title=(f"app '{a.app}' calls '{a.tool}' again with the same arguments in "
                   f"{share:.0%} of its calls"),
            evidence=_evidence(a, {"calls": a.calls, "repeat_calls": a.repeat_calls,
                                   "repeat_share": round(share, 4),
                                   "repeat_result_tokens": a.repeat_tokens}),
            tokens_per_month=tokens,
            cost_micros_per_month=micros(tokens, rates(a.model).input),
            currency=a.currency,
            action=(f"Cache '{a.tool}' results per session (or keep the first result in "
                    "the agent's memory): each repeat puts the same result into the "
                    "prompt again."),
        ))
    return out


def unused_results(aggs: Iterable[ToolAggregate], rates: Callable[[str], Rates],
                   window: Window, th: Thresholds) -> list[Finding]:
    out: list[Finding] = []
    for a in aggs:
        if a.calls < MIN_CALLS or a.upstream_tokens <= 0:
            continue
        cut = a.upstream_tokens - a.result_tokens
        dropped = cut + a.unused_tokens
        share = dropped / a.upstream_tokens
        tokens = int(window.per_month(dropped))
        if share < UNUSED_SHARE or tokens < th.min_tokens_per_month:
            continue
        out.append(Finding(
            kind="tool_results_dropped", tenant=a.tenant, app=a.app, model=a.model,
            title=(f"{share:.0%} of the tokens '{a.tool}' returns to app '{a.app}' never "
                   "reach a model"),
            evidence=_evidence(a, {"calls": a.calls, "upstream_tokens": a.upstream_tokens,
                                   "truncated_tokens": cut,
                                   "session_calls": a.session_calls,
                                   "unused_calls": a.unused_calls,
                                   "unused_tokens": a.unused_tokens,
                                   "dropped_share": round(share, 4)}),
            tokens_per_month=tokens, cost_micros_per_month=0, currency=a.currency,
            action=(f"Ask '{a.tool}' for less (narrower queries, fewer fields, a page at a "
                    "time) or stop offering it to this app: what is cut or never sent on "
                    "is fetched, screened and audited for nothing."),
        ))
    return out
