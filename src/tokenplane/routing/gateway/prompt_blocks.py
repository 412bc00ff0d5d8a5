"""Approximate prefix block hashes of a request, without tokenizing the prompt.

The gateway counts prompt tokens but does not keep token ids (tokenizing whole
prompts again would be too costly). Routing only needs *equal prefixes to give
equal leading hashes*, and roughly the right number of blocks. So each content
segment (a chat message: role + content; a text prompt: fixed-size slices) gets a
chained hash (the hash of the segment and of the hash before it; Python's own
string hash: the index lives in one process, so it need not be stable across
processes), and the
request's prompt tokens are spread over the segments by their share of the
characters. Segment ``i`` ends at cumulative token ``b_i``; it contributes the
blocks ``floor(b_{i-1} / B) .. floor(b_i / B) - 1`` (only full blocks, as an engine
caches them), each ``segment hash XOR block number``. Two requests sharing
their first k messages therefore share (about) the blocks of those messages.
See docs/ROUTING.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import orjson

TEXT_SLICE_CHARS = 512  # a plain-text prompt is cut into slices of this many chars


def _text(content: Any) -> str:
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


Segment = tuple[int, Hashable]  # (characters, hashable content)


def segments(operation: str, body: dict[str, Any]) -> list[Segment]:
    """The request's prompt as ordered content segments (length, hashable key).

    The keys reuse the body's own strings, whose hashes Python caches."""
    if operation == "chat":
        out: list[Segment] = []
        tools = body.get("tools")
        if tools:  # tools are rendered ahead of the messages by most templates
            text = _text(tools)
            out.append((len(text), ("tools", text)))
        for m in body.get("messages") or ():
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            content = m.get("content")
            text = content if isinstance(content, str) else _text(content)
            calls = m.get("tool_calls")
            extra = _text(calls) if calls else ""
            out.append((len(text) + len(extra) + 1, (role, text, extra)))
        return out
    prompt = body.get("prompt")
    text = prompt if isinstance(prompt, str) else _text(prompt)
    return [(min(TEXT_SLICE_CHARS, len(text) - i), text[i : i + TEXT_SLICE_CHARS])
            for i in range(0, len(text), TEXT_SLICE_CHARS)]


def chained_block_hashes(
    segs: Sequence[Segment], prompt_tokens: int, block_size: int
) -> list[int]:
    """Pseudo block hashes for ``prompt_tokens`` spread over ``segs`` by length."""
    total_chars = sum(n for n, _ in segs)
    if not segs or prompt_tokens < block_size or total_chars == 0:
        return []
    out: list[int] = []
    h = 0
    chars = 0
    done_blocks = 0
    for n, key in segs:
        h = hash((h, key))
        chars += n
        end_blocks = (prompt_tokens * chars // total_chars) // block_size
        if end_blocks > done_blocks:
            out.extend(h ^ j for j in range(done_blocks, end_blocks))
            done_blocks = end_blocks
    return out


def request_block_hashes(
    operation: str, body: dict[str, Any], prompt_tokens: int, block_size: int
) -> list[int]:
    """:func:`chained_block_hashes` of a request body (none for embeddings)."""
    if operation == "embeddings" or prompt_tokens < block_size:
        return []
    return chained_block_hashes(segments(operation, body), prompt_tokens, block_size)
