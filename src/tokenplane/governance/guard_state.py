"""Per-request governance state, kept on the request context (``ctx.guard``) from the
input guard to the output guard and the audit finisher."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tokenplane.governance.guard_policy import GuardPolicy
from tokenplane.governance.pii_policy import Finding
from tokenplane.governance.vault import Vault
from tokenplane.operations.base import Operation

INJECTION_HEADER = "x-tokenplane-injection"
INJECTION_FLAG = "injection_flagged"
# error codes of requests a guard refused (the audit verdict "block")
BLOCK_CODES = frozenset({
    "pii_blocked", "prompt_injection_blocked", "tool_not_allowed", "context_limit_exceeded",
    "output_limit_exceeded",
})


@dataclass
class GuardState:
    """What the guards decided for one request (entity types and counts, never values)."""

    policy: GuardPolicy
    request_content: Any = None  # what the client sent (messages / prompt / input)
    response_body: bytes | None = None  # a non-stream answer as the client got it
    verdicts: dict[str, Any] = field(default_factory=dict)
    flagged: bool = False
    # the message the RAG documents became, their PII rules already applied
    # (governance/document_guard.py): the input guard does not scan it again
    screened_message: Any = None
    _vault: Vault | None = field(default=None, repr=False)  # made on first use

    @property
    def vault(self) -> Vault:
        """The request's placeholders (most requests never need one)."""
        vault = self._vault
        if vault is None:
            vault = self._vault = Vault()
        return vault

    def note_pii(self, where: str, findings: Iterable[Finding] = ()) -> None:
        """Count findings by entity type and action under ``verdicts["pii"][where]``
        (with none, the text at ``where`` was scanned and is clean)."""
        slot = self._slot(where)
        for f in findings:
            by_action = slot.setdefault(f.entity_type, {})
            by_action[f.action.value] = by_action.get(f.action.value, 0) + 1

    def _slot(self, where: str) -> dict[str, dict[str, int]]:
        found = self.verdicts.get("pii")
        if found is None:
            found = self.verdicts["pii"] = {}
        slot: dict[str, dict[str, int]] | None = found.get(where)
        if slot is None:
            slot = found[where] = {}
        return slot

    def note_blocked(self, where: str, entity_types: list[str]) -> None:
        slot = self._slot(where)
        for t in entity_types:
            slot.setdefault(t, {})["block"] = 1

    def output_active(self, operation: Operation) -> bool:
        """True when answers must be parsed: placeholders to restore, a response policy
        that rewrites, or tool calls to check."""
        tools = operation.tools and self.policy.tools.allowed is not None
        placeholders = self._vault is not None and bool(len(self._vault))
        return placeholders or self.policy.response_rewrites or tools

