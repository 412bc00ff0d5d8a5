"""Apply a PII policy to chat messages (string content and content parts) and tool results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenplane.governance.pii_policy import Finding, PiiBlocked, PiiPolicy, apply
from tokenplane.governance.vault import Vault


@dataclass(frozen=True, slots=True)
class MessageFinding:
    """A finding located in message ``index`` (content part ``part`` when a list)."""

    index: int
    part: int | None
    role: str
    finding: Finding


def apply_messages(
    messages: Sequence[dict[str, Any]], policy: PiiPolicy, vault: Vault
) -> tuple[list[dict[str, Any]], list[MessageFinding]]:
    """A new message list with the policy applied to every text; inputs are not modified.

    Covers ``content`` strings, ``{"type": "text", "text": ...}`` parts and tool
    results (role ``tool``). Blocks if any message contains a blocked type, naming
    all blocked types found across the messages.
    """
    out: list[dict[str, Any]] = []
    found: list[MessageFinding] = []
    blocked: list[str] = []
    for i, message in enumerate(messages):
        role = str(message.get("role", ""))
        content = message.get("content")
        new = dict(message)
        try:
            if isinstance(content, str):
                new["content"], fs = apply(content, policy, vault)
                found.extend(MessageFinding(i, None, role, f) for f in fs)
            elif isinstance(content, list):
                parts: list[Any] = []
                for j, part in enumerate(content):
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        text, fs = apply(part["text"], policy, vault)
                        parts.append({**part, "text": text})
                        found.extend(MessageFinding(i, j, role, f) for f in fs)
                    else:
                        parts.append(part)
                new["content"] = parts
        except PiiBlocked as exc:
            blocked.extend(exc.entity_types)
        out.append(new)
    if blocked:
        raise PiiBlocked(blocked)
    return out, found
