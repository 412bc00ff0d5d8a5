"""A tool's result as the model will read it: its text, its size in the accounting
model's tokens, and the result cut to ``max_result_tokens`` (head and tail of each text
kept around a marker, exact to the token) before it leaves the gateway."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tokenplane.sessions.tool_output import head_tail
from tokenplane.tokens.base import Tokenizer

MARKER = "\n[... {dropped} tokens of tool output removed by tokenplane ...]\n"
HEAD_SHARE = 0.5


def result_texts(result: Any) -> list[str]:
    """The texts of a ``CallToolResult`` (text blocks, embedded text resources); its
    ``structuredContent`` as JSON when it has no text."""
    texts: list[str] = []
    if not isinstance(result, dict):
        return texts
    for block in result.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "resource":
            res = block.get("resource")
            if isinstance(res, dict) and isinstance(res.get("text"), str):
                texts.append(res["text"])
    if not texts and result.get("structuredContent") is not None:
        texts.append(orjson.dumps(result["structuredContent"]).decode())
    return texts


def structured_json(result: Any) -> str | None:
    """A result's ``structuredContent`` as compact JSON (as ``JSON.stringify`` writes
    it: Claude Code gives the model that instead of the text blocks), or None."""
    if not isinstance(result, dict) or result.get("structuredContent") is None:
        return None
    return orjson.dumps(result["structuredContent"]).decode()


def read_texts(result: Any) -> list[str]:
    """The texts of a ``ReadResourceResult`` or a ``GetPromptResult``."""
    texts: list[str] = []
    if not isinstance(result, dict):
        return texts
    for c in result.get("contents") or []:
        if isinstance(c, dict) and isinstance(c.get("text"), str):
            texts.append(c["text"])
    for m in result.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, dict) and isinstance(content.get("text"), str):
            texts.append(content["text"])
    return texts


@dataclass(frozen=True)
class Cut:
    result: dict[str, Any]
    tokens_before: int
    tokens_after: int
    truncated: bool


def truncate(result: dict[str, Any], limit: int, tokenizer: Tokenizer,
             count: Callable[[str], int]) -> Cut:
    """``result`` with its text blocks cut so that they hold at most ``limit`` tokens
    in all (earlier blocks first; a block past the budget is replaced by the marker);
    ``structuredContent`` dropped when anything was cut (it would carry the whole)."""
    blocks = result.get("content") or []
    sizes = [count(b["text"]) if _is_text(b) else 0 for b in blocks]
    before = sum(sizes)
    if before <= limit:
        return Cut(result, before, before, False)
    left = limit
    out: list[Any] = []
    for block, size in zip(blocks, sizes, strict=True):
        if not _is_text(block):
            out.append(block)
            continue
        if size <= left:
            out.append(block)
            left -= size
            continue
        text = head_tail(block["text"], left, HEAD_SHARE, MARKER, tokenizer, count) \
            if left > 0 else ""
        left -= count(text) if text else 0
        if text:
            out.append({**block, "text": text})
    cut = {k: v for k, v in result.items() if k not in ("content", "structuredContent")}
    cut["content"] = out
    after = sum(count(b["text"]) for b in out if _is_text(b))
    return Cut(cut, before, after, True)


def _is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" \
        and isinstance(block.get("text"), str)
