"""The fields of one audited request, as the pipeline hands them to the audit log."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AuditEntry:
    """One request and its decisions. ``content`` is kept per the log's retention mode."""

    request_id: str
    tenant: str
    key_id: str | None = None
    principal: str | None = None
    app: str | None = None
    model: str | None = None
    backend: str | None = None
    status: int | None = None
    tokens: dict[str, int] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[str, Any] = field(default_factory=dict)
    verdict: str = "allow"  # allow | flag | block: the summary used by search
    content: Any = None
    # the agent session: {"id", "step", "tool_results": digests of its tool results}
    session: dict[str, Any] | None = None

    def to_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "kind": "request",
            "request_id": self.request_id,
            "tenant": self.tenant,
            "key_id": self.key_id,
            "principal": self.principal,
            "app": self.app,
            "model": self.model,
            "backend": self.backend,
            "status": self.status,
            "tokens": self.tokens,
            "limits": self.limits,
            "verdicts": self.verdicts,
            "verdict": self.verdict,
        }
        if self.session is not None:
            fields["session"] = self.session
        if self.content is not None:
            fields["content"] = self.content
        return fields
