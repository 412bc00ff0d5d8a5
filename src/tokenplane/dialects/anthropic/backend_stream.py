"""An Anthropic backend's stream events as canonical ``chat.completion.chunk`` dicts.

The first chunk carries ``delta.role``; a tool_use block's start is its call's first
fragment (index, id, name, empty arguments), each ``input_json_delta`` a further
fragment. What only Anthropic gives rides in ``delta.x_anthropic`` (a thinking
block's ``signature``, a ``redacted_thinking`` block's data, the matched
``stop_sequence``) so ``stream.MessagesStream`` can give it back to a Messages client.
``message_delta`` ends the choice and adds a usage-only chunk (``choices: []``), as
OpenAI's ``include_usage`` does.
"""

from __future__ import annotations

from typing import Any

from tokenplane.dialects.anthropic.backend_answer import finish_reason
from tokenplane.dialects.anthropic.extension import EXT
from tokenplane.dialects.usage import Usage

_INPUT_FIELDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                 "cache_creation")


class ChatChunks:
    """Feed each event (its ``event:`` name and parsed ``data``) in order."""

    def __init__(self, *, created: int = 0) -> None:
        self.created = created
        self.id = ""
        self.model = ""
        self.usage: Usage | None = None  # the cumulative usage once message_delta came
        self._input: dict[str, Any] = {}
        self._tools: dict[int, int] = {}  # block index -> tool call index

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def _start(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        msg = data.get("message")
        msg = msg if isinstance(msg, dict) else {}
        mid, model = msg.get("id"), msg.get("model")
        self.id = mid if isinstance(mid, str) else ""
        self.model = model if isinstance(model, str) else ""
        usage = msg.get("usage")
        if isinstance(usage, dict):
            self._input = {k: usage[k] for k in _INPUT_FIELDS if k in usage}
        return [self._chunk({"role": "assistant", "content": ""})]

    def _block_start(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        block = data.get("content_block")
        block = block if isinstance(block, dict) else {}
        kind = block.get("type")
        if kind == "tool_use":
            index = len(self._tools)
            self._tools[data.get("index", -1)] = index
            return [self._chunk({"tool_calls": [{
                "index": index, "id": block.get("id"), "type": "function",
                "function": {"name": block.get("name"), "arguments": ""}}]})]
        if kind == "redacted_thinking":
            return [self._chunk({EXT: {"redacted_thinking": block.get("data")}})]
        if kind == "text" and isinstance(block.get("text"), str) and block["text"]:
            return [self._chunk({"content": block["text"]})]
        return []

    def _block_delta(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        delta = data.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        kind = delta.get("type")
        if kind == "text_delta":
            return [self._chunk({"content": delta.get("text", "")})]
        if kind == "thinking_delta":
            return [self._chunk({"reasoning_content": delta.get("thinking", "")})]
        if kind == "signature_delta":
            return [self._chunk({EXT: {"signature": delta.get("signature", "")}})]
        if kind == "input_json_delta":
            part = delta.get("partial_json")
            index = self._tools.get(data.get("index", -1))
            if index is None or not isinstance(part, str) or not part:
                return []
            return [self._chunk({"tool_calls": [{"index": index,
                                                 "function": {"arguments": part}}]})]
        return []

    def _message_delta(self, data: dict[str, Any]) -> list[dict[str, Any]]:
        delta = data.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        reason = delta.get("stop_reason")
        chunk_delta: dict[str, Any] = {}
        seq = delta.get("stop_sequence")
        if reason == "stop_sequence" and isinstance(seq, str):
            chunk_delta[EXT] = {"stop_sequence": seq}
        out = [self._chunk(chunk_delta, finish_reason(reason) or "stop")]
        usage = data.get("usage")
        fields = dict(self._input)
        if isinstance(usage, dict):
            fields.update({k: v for k, v in usage.items() if v is not None})
        self.usage = Usage.from_anthropic(fields)
        out.append({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                    "model": self.model, "choices": [], "usage": self.usage.to_openai()})
        return out

    def feed(self, event: str, data: dict[str, Any]) -> list[dict[str, Any]]:
        """The chunks of one stream event (``data`` is its parsed JSON)."""
        kind = data.get("type") if isinstance(data.get("type"), str) else event
        if kind == "message_start":
            return self._start(data)
        if kind == "content_block_start":
            return self._block_start(data)
        if kind == "content_block_delta":
            return self._block_delta(data)
        if kind == "message_delta":
            return self._message_delta(data)
        if kind == "error":
            err = data.get("error")
            err = err if isinstance(err, dict) else {}
            message = err.get("message")
            return [{"error": {"message": message if isinstance(message, str) else
                               "The Anthropic backend's stream failed.",
                               "type": err.get("type") or "api_error", "param": None,
                               "code": err.get("type")}}]
        return []  # ping, content_block_stop, message_stop, anything new
