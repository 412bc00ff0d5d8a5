"""Audit records of MCP calls, in the same hash-chained log as the requests
(``kind: "mcp"``): who, which server and name, the decision, latency, the result's bytes
and tokens, the agent session (``x-tokenplane-session``) and the result's digests that
link it to the model requests carrying it; the arguments and result texts as content,
kept per the log's retention (``redacted``, the default: every recognised PII entity
masked)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenplane.governance.audit.entry import AuditEntry


@dataclass
class McpAuditEntry(AuditEntry):
    method: str = ""
    server: str | None = None
    name: str | None = None
    decision: str = "allow"
    reason: str | None = None
    latency_ms: float = 0.0
    result_bytes: int = 0
    mcp_session: str | None = None  # the MCP session id
    flags: list[str] = field(default_factory=list)
    # where the result may be found again: digests of its texts (sessions/tool_links.py)
    result_digests: list[str] = field(default_factory=list)
    args_digest: str | None = None  # the arguments' digest: repeated calls (the advisor)
    finished: bool = False  # counted and submitted (not a field of the record)

    def to_fields(self) -> dict[str, Any]:
        fields = super().to_fields()
        fields.update({
            "kind": "mcp", "method": self.method, "server": self.server, "name": self.name,
            "decision": self.decision, "reason": self.reason,
            "latency_ms": round(self.latency_ms, 3), "result_bytes": self.result_bytes,
            "mcp_session": self.mcp_session, "flags": self.flags,
            "result_digests": self.result_digests, "args_digest": self.args_digest,
        })
        return fields
