"""Dialect extensions on the canonical request: what a client's dialect says that the
canonical (chat-shaped) form has no field for rides along under an ``x_<dialect>`` key
(``x_anthropic``: cache_control markers, thinking signatures) on the body, a message, a
content part or a tool, for a backend of that dialect to restore. Any other backend
gets the body without them (:func:`strip_extensions`)."""

from __future__ import annotations

from typing import Any

PREFIX = "x_"


def _has(d: dict[str, Any]) -> bool:
    return any(k.startswith(PREFIX) for k in d)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if not k.startswith(PREFIX)}


def _strip_parts(content: Any) -> tuple[Any, bool]:
    if not isinstance(content, list) or not any(isinstance(p, dict) and _has(p)
                                                for p in content):
        return content, False
    return [_clean(p) if isinstance(p, dict) else p for p in content], True


def _strip_message(m: Any) -> tuple[Any, bool]:
    if not isinstance(m, dict):
        return m, False
    content, changed = _strip_parts(m.get("content"))
    if not changed and not _has(m):
        return m, False
    out = _clean(m)
    if changed:
        out["content"] = content
    return out, True


def strip_extensions(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without extension keys on the body, its messages, their content parts
    and its tools. Shallow: what has none is shared with ``body``, and when there is
    none at all ``body`` itself is returned."""
    messages = body.get("messages")
    new_messages: list[Any] | None = None
    if isinstance(messages, list):
        for i, m in enumerate(messages):
            sm, changed = _strip_message(m)
            if changed:
                if new_messages is None:
                    new_messages = list(messages[:i])
                new_messages.append(sm)
            elif new_messages is not None:
                new_messages.append(m)
    tools = body.get("tools")
    new_tools: list[Any] | None = None
    if isinstance(tools, list) and any(isinstance(t, dict) and _has(t) for t in tools):
        new_tools = [_clean(t) if isinstance(t, dict) else t for t in tools]
    if new_messages is None and new_tools is None and not _has(body):
        return body
    out = _clean(body)
    if new_messages is not None:
        out["messages"] = new_messages
    if new_tools is not None:
        out["tools"] = new_tools
    return out
