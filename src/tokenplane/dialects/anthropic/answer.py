"""A canonical answer (a ``chat.completion``) as an Anthropic Messages answer.

Its blocks, in order: thinking (the message's verbatim ``x_anthropic.thinking_blocks``
when an Anthropic backend gave them, else its ``reasoning_content`` with an empty
signature), the text, then one ``tool_use`` per tool call.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tokenplane.dialects.anthropic.extension import ext
from tokenplane.dialects.usage import Usage

_STOP_REASONS = {
    "stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use",
    "function_call": "tool_use", "content_filter": "refusal",
}


def stop_reason(finish_reason: str | None, has_tool_calls: bool) -> str:
    """Anthropic's ``stop_reason`` for a chat ``finish_reason``: a finished turn with
    tool calls is ``tool_use`` whatever the backend said (some say ``stop``)."""
    if has_tool_calls and finish_reason in (None, "stop", "tool_calls", "function_call"):
        return "tool_use"
    if finish_reason == "tool_calls" and not has_tool_calls:
        return "end_turn"
    return _STOP_REASONS.get(finish_reason or "stop", "end_turn")


def matched_stop(choice: dict[str, Any]) -> str | None:
    """The stop sequence a choice ended on, when the backend says: the message's (or
    the choice's) ``x_anthropic.stop_sequence``, or vLLM's ``stop_reason`` string."""
    message = choice.get("message") or choice.get("delta")
    for holder in (message if isinstance(message, dict) else {}, choice):
        s = ext(holder).get("stop_sequence")
        if isinstance(s, str):
            return s
    s = choice.get("stop_reason")
    return s if isinstance(s, str) and s else None


def tool_use_id(call_id: Any, message_id: str, index: int) -> str:
    """The call's own id, or one derived from the message's id and the call's index."""
    if isinstance(call_id, str) and call_id:
        return call_id
    digest = hashlib.sha256(f"{message_id}:{index}".encode()).hexdigest()[:24]
    return f"toolu_{digest}"


def tool_input(arguments: Any) -> dict[str, Any]:
    """A call's arguments as the ``input`` object (``{}`` when not a JSON object)."""
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            return {}
        if isinstance(value, dict):
            return value
    return {}


def message_text(content: Any) -> str:
    """A chat message's ``content`` as one string (text parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def reasoning_text(message: dict[str, Any]) -> str:
    for key in ("reasoning_content", "reasoning"):
        v = message.get(key)
        if isinstance(v, str) and v:
            return v
    return ""


def thinking_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    kept = ext(message).get("thinking_blocks")
    if isinstance(kept, list) and kept:
        return [b for b in kept if isinstance(b, dict)]
    text = reasoning_text(message)
    return [{"type": "thinking", "thinking": text, "signature": ""}] if text else []


def content_blocks(message: dict[str, Any], message_id: str) -> list[dict[str, Any]]:
    blocks = thinking_blocks(message)
    text = message_text(message.get("content"))
    if not text and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    if text:
        blocks.append({"type": "text", "text": text})
    calls = message.get("tool_calls")
    for i, call in enumerate(calls if isinstance(calls, list) else []):
        if not isinstance(call, dict):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        name = fn.get("name")
        blocks.append({"type": "tool_use", "id": tool_use_id(call.get("id"), message_id, i),
                       "name": name if isinstance(name, str) else "",
                       "input": tool_input(fn.get("arguments"))})
    return blocks


def to_messages(obj: dict[str, Any], *, model: str, message_id: str,
                usage: Usage | None) -> dict[str, Any]:
    """The Messages answer of a ``chat.completion`` (its first choice)."""
    choices = obj.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices \
        and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    blocks = content_blocks(message, message_id)
    has_calls = any(b["type"] == "tool_use" for b in blocks)
    finish = choice.get("finish_reason")
    reason = stop_reason(finish if isinstance(finish, str) else None, has_calls)
    seq = matched_stop(choice) if reason == "end_turn" else None
    if seq is not None:
        reason = "stop_sequence"
    if usage is None:
        usage = Usage.read(obj.get("usage")) or Usage()
    return {"id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": reason, "stop_sequence": seq,
            "usage": usage.to_anthropic()}
