"""The link between a tool's result and the model requests that carry it: a digest of
the result's text, computed where the MCP gateway forwards the result and again on each
tool message of a session's step. Equal digests: that step's prompt holds that result
(docs/MCP.md, "Which tool costs what")."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from tokenplane.sessions.tool_output import TOOL_ROLES, content_text

DIGEST_CHARS = 16


def result_digest(text: str) -> str:
    """A short digest of a result's text (whitespace at its ends ignored: clients trim)."""
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()[
        :DIGEST_CHARS]


def forwarded_digests(texts: Sequence[str], structured: str | None = None) -> list[str]:
    """The digests a forwarded result may be found under: each text block alone, all of
    them joined by newlines (as clients that flatten a result send it), and its
    ``structuredContent`` as compact JSON (``structured``: Claude Code sends the model
    that instead of the text when a result has it)."""
    out = [result_digest(t) for t in texts if t.strip()]
    if len(texts) > 1:
        out.append(result_digest("\n".join(texts)))
    if structured and structured.strip():
        out.append(result_digest(structured))
    return list(dict.fromkeys(out))


REMINDER_OPEN, REMINDER_CLOSE = "<system-reminder>", "</system-reminder>"


def without_reminders(text: str) -> str:
    """``text`` without the ``<system-reminder>`` sections at its end: Claude Code
    appends them to the tool results it sends (the tokens left, for one)."""
    t = text.rstrip()
    while t.endswith(REMINDER_CLOSE):
        start = t.rfind(REMINDER_OPEN)
        if start < 0:
            break
        t = t[:start].rstrip()
    return t


def message_digests(messages: Iterable[Any]) -> tuple[str, ...]:
    """The digests of a prompt's tool messages, each once, in order; a message that
    ends in ``<system-reminder>`` sections also under its text without them."""
    seen: dict[str, None] = {}
    for m in messages:
        if isinstance(m, dict) and m.get("role") in TOOL_ROLES:
            text = content_text(m.get("content"))
            if text.strip():
                seen[result_digest(text)] = None
                bare = without_reminders(text)
                if bare and bare != text.rstrip():
                    seen[result_digest(bare)] = None
    return tuple(seen)
