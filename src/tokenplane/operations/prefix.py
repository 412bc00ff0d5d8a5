"""Prompt prefix segments for prefix-cache routing, without tokenizing the prompt.

Each content segment is ``(characters, hashable key)``: a chat message (role, text,
tool calls), the tool definitions ahead of them, or a fixed-size slice of a plain text
prompt. The keys reuse the body's own strings, whose hashes Python caches. How the
segments become block hashes is routing's business (``routing/prompt_blocks.py``).
"""

from __future__ import annotations

from typing import Any

import orjson

from tokenplane.operations.base import Segment

TEXT_SLICE_CHARS = 512  # a plain-text prompt is cut into slices of this many chars


def flat_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            else:
                parts.append(orjson.dumps(p, option=orjson.OPT_SORT_KEYS).decode())
        return "\n".join(parts)
    if content is None:
        return ""
    return orjson.dumps(content, option=orjson.OPT_SORT_KEYS).decode()


def message_segments(messages: Any, tools: Any) -> list[Segment]:
    """Tools (rendered ahead of the messages by most templates), then one segment per
    message."""
    out: list[Segment] = []
    if tools:
        text = flat_text(tools)
        out.append((len(text), ("tools", text)))
    for m in messages or ():
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        content = m.get("content")
        text = content if isinstance(content, str) else flat_text(content)
        calls = m.get("tool_calls")
        extra = flat_text(calls) if calls else ""
        out.append((len(text) + len(extra) + 1, (role, text, extra)))
    return out


def text_segments(prompt: Any) -> list[Segment]:
    """A text prompt (or token ids, flattened to text) in slices."""
    text = prompt if isinstance(prompt, str) else flat_text(prompt)
    return [(min(TEXT_SLICE_CHARS, len(text) - i), text[i : i + TEXT_SLICE_CHARS])
            for i in range(0, len(text), TEXT_SLICE_CHARS)]
