"""Tool usage from the audit log's MCP records (``kind: "mcp"``): per tool (and app),
calls, denials, latency, result tokens. What ``tokenplane tools usage`` prints and the
console's Tools page shows."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

DENIALS = frozenset({"deny_hidden", "deny_argument", "deny_destructive", "confirm_required",
                     "rate_limited", "concurrency_limited", "injection_blocked",
                     "result_refused"})
FAILURES = frozenset({"upstream_error", "timeout"})


@dataclass
class ToolUsage:
    server: str
    name: str
    app: str | None
    calls: int = 0
    denied: int = 0
    failed: int = 0
    truncated: int = 0
    result_tokens: int = 0
    result_bytes: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        return {
            "tool": f"{self.server}__{self.name}", "app": self.app or "-",
            "calls": self.calls, "denied": self.denied, "failed": self.failed,
            "truncated": self.truncated, "result_tokens": self.result_tokens,
            "result_bytes": self.result_bytes,
            "tokens_per_call": round(self.result_tokens / max(1, self.calls - self.denied
                                                              - self.failed), 1),
            "p50_ms": round(statistics.median(lat), 2) if lat else None,
            "p95_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.95))], 2) if lat else None,
        }


def tool_usage(records: Iterable[dict[str, Any]], *, tenant: str | None = None,
               by_app: bool = True, method: str = "tools/call") -> list[dict[str, Any]]:
    """Rows by tool (and app), the most result tokens first."""
    table: dict[tuple[str, str, str | None], ToolUsage] = {}
    for rec in records:
        if rec.get("kind") != "mcp" or rec.get("method") != method:
            continue
        if tenant is not None and rec.get("tenant") != tenant:
            continue
        server, name = str(rec.get("server")), str(rec.get("name"))
        app = rec.get("app") if by_app else None
        key = (server, name, app)
        u = table.get(key)
        if u is None:
            u = table[key] = ToolUsage(server, name, app)
        u.calls += 1
        decision = rec.get("decision")
        if decision in DENIALS:
            u.denied += 1
            continue
        if decision in FAILURES:
            u.failed += 1
            continue
        tokens = rec.get("tokens") or {}
        u.result_tokens += int(tokens.get("result") or 0)
        u.result_bytes += int(rec.get("result_bytes") or 0)
        if "truncated" in (rec.get("flags") or []):
            u.truncated += 1
        lat = rec.get("latency_ms")
        if isinstance(lat, int | float):
            u.latencies_ms.append(float(lat))
    rows = [u.row() for u in table.values()]
    rows.sort(key=lambda r: (-r["result_tokens"], r["tool"], r["app"]))
    return rows
