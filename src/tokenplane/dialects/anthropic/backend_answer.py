"""An Anthropic backend's Messages answer as a canonical ``chat.completion``."""

from __future__ import annotations

from typing import Any

from tokenplane.dialects.anthropic.extension import EXT
from tokenplane.dialects.anthropic.request_content import compact_json
from tokenplane.dialects.usage import Usage

FINISH_REASONS = {
    "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
    "tool_use": "tool_calls", "refusal": "content_filter", "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}


def finish_reason(stop_reason: Any) -> str | None:
    """The chat ``finish_reason`` of an Anthropic ``stop_reason`` (None for None)."""
    if stop_reason is None:
        return None
    return FINISH_REASONS.get(stop_reason, "stop") if isinstance(stop_reason, str) else "stop"


def to_chat_answer(obj: dict[str, Any], *, created: int = 0) -> dict[str, Any]:
    """The ``chat.completion`` of a Messages answer (``created``: the caller's clock,
    as this module reads none)."""
    texts: list[str] = []
    thinking: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    content = obj.get("content")
    for b in content if isinstance(content, list) else []:
        if not isinstance(b, dict):
            continue
        kind = b.get("type")
        if kind == "text" and isinstance(b.get("text"), str):
            texts.append(b["text"])
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(b)
        elif kind == "tool_use":
            args = b.get("input")
            calls.append({"id": b.get("id"), "type": "function", "function": {
                "name": b.get("name"),
                "arguments": compact_json(args if isinstance(args, dict) else {})}})
    text = "".join(texts)
    message: dict[str, Any] = {"role": "assistant",
                               "content": text if text or not calls else None}
    if calls:
        message["tool_calls"] = calls
    x: dict[str, Any] = {}
    if thinking:
        message["reasoning_content"] = "".join(
            b["thinking"] for b in thinking
            if b.get("type") == "thinking" and isinstance(b.get("thinking"), str))
        x["thinking_blocks"] = thinking
    seq = obj.get("stop_sequence")
    if isinstance(seq, str) and obj.get("stop_reason") == "stop_sequence":
        x["stop_sequence"] = seq
    if x:
        message[EXT] = x
    out: dict[str, Any] = {
        "id": obj.get("id") or "", "object": "chat.completion", "created": created,
        "model": obj.get("model") or "",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": finish_reason(obj.get("stop_reason")) or "stop",
                     "logprobs": None}],
    }
    usage = obj.get("usage")
    if isinstance(usage, dict):
        out["usage"] = Usage.from_anthropic(usage).to_openai()
    return out
