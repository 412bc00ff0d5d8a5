"""Which tool costs what in an agent session: the MCP calls whose results a session's
steps carried, joined by the results' digests (``sessions/tool_links.py``). A result
costs its tokens in every step whose prompt holds it, so "tool X's results were 41% of
this session's input tokens" is a sum over steps, not a guess."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class _Call:
    request_id: str
    tool: str
    tokens: int
    ts: float
    first_step: int | None = None
    steps: int = 0


def tool_costs(session_id: str, tenant: str, steps: Iterable[Mapping[str, Any]],
               records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``steps``: the session's ledger events (``request_id``, ``session_step``,
    ``arrival_ts``, ``input_tokens``); ``records``: audit records of the window. The
    tool calls each step's prompt carried (the latest call with that result before the
    step), and per tool the tokens its results added over the session."""
    carried: dict[str, list[str]] = {}
    by_digest: dict[str, list[_Call]] = {}
    for rec in records:
        if rec.get("tenant") != tenant:
            continue
        kind = rec.get("kind")
        session = rec.get("session") or {}
        if kind == "request" and session.get("id") == session_id:
            carried[str(rec.get("request_id"))] = list(session.get("tool_results") or [])
        elif kind == "mcp" and rec.get("method") == "tools/call" \
                and rec.get("decision") == "allow":
            tokens = int((rec.get("tokens") or {}).get("result") or 0)
            call = _Call(str(rec.get("request_id")), f"{rec.get('server')}__{rec.get('name')}",
                         tokens, float(rec.get("ts") or 0.0))
            for d in rec.get("result_digests") or []:
                by_digest.setdefault(d, []).append(call)
    total_input = 0
    links: dict[int, _Call] = {}
    per_tool: dict[str, dict[str, Any]] = {}
    seen_steps: set[str] = set()
    for ev in sorted(steps, key=lambda e: (e.get("arrival_ts") or 0.0)):
        rid = str(ev.get("request_id"))
        if rid in seen_steps:  # a retried attempt: counted once
            continue
        seen_steps.add(rid)
        total_input += int(ev.get("input_tokens") or 0)
        arrival = float(ev.get("arrival_ts") or 0.0)
        found: dict[int, _Call] = {}
        for d in carried.get(rid, []):
            before = [c for c in by_digest.get(d, []) if c.ts <= arrival]
            if before:
                call = max(before, key=lambda c: c.ts)
                found[id(call)] = call
        for call in found.values():
            links[id(call)] = call
            call.steps += 1
            if call.first_step is None:
                call.first_step = ev.get("session_step")
            t = per_tool.setdefault(call.tool, {"tool": call.tool, "calls": 0,
                                                "result_tokens": 0, "carried_tokens": 0})
            t["carried_tokens"] += call.tokens
    for call in links.values():
        t = per_tool[call.tool]
        t["calls"] += 1
        t["result_tokens"] += call.tokens
    tools = sorted(per_tool.values(), key=lambda t: (-t["carried_tokens"], t["tool"]))
    for t in tools:
        t["share_of_input"] = round(t["carried_tokens"] / total_input, 4) if total_input else 0.0
    calls = [{"call_request_id": c.request_id, "tool": c.tool, "tokens": c.tokens,
              "first_step": c.first_step, "steps_carrying": c.steps}
             for c in sorted(links.values(), key=lambda c: c.ts)]
    return {"input_tokens": total_input, "tools": tools, "calls": calls}
