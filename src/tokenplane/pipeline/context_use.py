"""What the context stage and the overflow policy did to a request, for the ledger
and the answer (``pipeline/context_stage.py``, ``pipeline/overflow.py``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OverflowUse:
    """``action``: ``trim_history`` or ``fallback``; ``from_alias``: the alias asked
    for (fallback); the messages and prompt tokens trimmed away."""

    action: str
    from_alias: str | None = None
    dropped_messages: int = 0
    dropped_tokens: int = 0
