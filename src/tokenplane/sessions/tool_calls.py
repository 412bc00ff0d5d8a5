"""The tool calls an answer makes, counted from a chat completion or its stream."""

from __future__ import annotations

from typing import Any


def answer_tool_calls(obj: dict[str, Any]) -> int:
    """Tool calls in a non-stream chat completion (every choice)."""
    n = 0
    for choice in obj.get("choices") or ():
        msg = choice.get("message") if isinstance(choice, dict) else None
        calls = msg.get("tool_calls") if isinstance(msg, dict) else None
        if isinstance(calls, list):
            n += len(calls)
    return n


def chunk_tool_calls(obj: dict[str, Any]) -> int:
    """New tool calls opened by one stream chunk: the deltas that carry an ``id`` (the
    later deltas of a call carry only more of its arguments)."""
    n = 0
    for choice in obj.get("choices") or ():
        delta = choice.get("delta") if isinstance(choice, dict) else None
        calls = delta.get("tool_calls") if isinstance(delta, dict) else None
        if isinstance(calls, list):
            n += sum(1 for c in calls if isinstance(c, dict) and c.get("id"))
    return n
