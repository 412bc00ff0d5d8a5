"""The ``x_anthropic`` extension key: Anthropic-only details of a request that ride
along in the canonical chat body so that they survive a round trip to an Anthropic
backend. It is found on the body, on a message, on a content part or on a tool, and
nowhere else; :func:`strip_extensions` takes it off before a body goes to a backend
that speaks OpenAI."""

from __future__ import annotations

from typing import Any

EXT = "x_anthropic"


def ext(d: dict[str, Any]) -> dict[str, Any]:
    """The extension dict on ``d`` (empty when absent or not a dict)."""
    x = d.get(EXT)
    return x if isinstance(x, dict) else {}


def _strip_parts(content: Any) -> tuple[Any, bool]:
    if not isinstance(content, list):
        return content, False
    if not any(isinstance(p, dict) and EXT in p for p in content):
        return content, False
    return [({k: v for k, v in p.items() if k != EXT} if isinstance(p, dict) else p)
            for p in content], True


def _strip_message(m: Any) -> tuple[Any, bool]:
    if not isinstance(m, dict):
        return m, False
    content, changed = _strip_parts(m.get("content"))
    if not changed and EXT not in m:
        return m, False
    out = {k: v for k, v in m.items() if k != EXT}
    if changed:
        out["content"] = content
    return out, True


def strip_extensions(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without any ``x_anthropic`` key on the body, its messages, their content
    parts and its tools. Shallow: what has no extension is shared with ``body``, and
    when there is none at all ``body`` itself is returned."""
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
    if isinstance(tools, list) and any(isinstance(t, dict) and EXT in t for t in tools):
        new_tools = [({k: v for k, v in t.items() if k != EXT} if isinstance(t, dict) else t)
                     for t in tools]
    if new_messages is None and new_tools is None and EXT not in body:
        return body
    out = {k: v for k, v in body.items() if k != EXT}
    if new_messages is not None:
        out["messages"] = new_messages
    if new_tools is not None:
        out["tools"] = new_tools
    return out
