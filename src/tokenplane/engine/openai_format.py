"""The JSON shapes vLLM returns for chat and completions (whole bodies and SSE chunks)."""

from __future__ import annotations

from typing import Any

import orjson

DONE = b"data: [DONE]\n\n"


def sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def usage(prompt: int, completion: int, cached: int, reasoning: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


class Formatter:
    """Builds one request's chunks and body; a subclass per answer shape (the engine
    kind picks it: ``engine/kinds.py``)."""

    chunk_object = ""  # the ``object`` of a stream chunk

    def __init__(self, rid: str, created: int, model: str, include_usage: bool) -> None:
        self.rid = rid
        self.created = created
        self.model = model
        self.include_usage = include_usage

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "id": self.rid,
            "object": self.chunk_object,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.include_usage:
            obj["usage"] = None
        return obj

    def role_chunk(self) -> bytes | None:
        """The chunk a stream opens with, if the shape has one."""
        return None

    def token_chunk(self, text: str, reasoning: bool, finish_reason: str | None) -> bytes:
        raise NotImplementedError

    def usage_chunk(self, use: dict[str, Any]) -> bytes:
        obj = self._envelope([])
        obj["usage"] = use
        return sse(obj)

    def body(self, content: str, reasoning: str | None, finish_reason: str,
             use: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def _body(self, kind: str, choice: dict[str, Any], use: dict[str, Any]) -> bytes:
        return orjson.dumps({"id": self.rid, "object": kind, "created": self.created,
                             "model": self.model, "choices": [choice], "usage": use})


class ChatFormatter(Formatter):
    """Chat completions: ``delta`` chunks, a ``message`` body."""

    chunk_object = "chat.completion.chunk"

    def role_chunk(self) -> bytes | None:
        """Chat streams open with the assistant role (vLLM sends it with the first token)."""
        delta = {"role": "assistant", "content": ""}
        return sse(self._envelope([_choice_delta(delta, None)]))

    def token_chunk(self, text: str, reasoning: bool, finish_reason: str | None) -> bytes:
        delta = {"reasoning_content": text} if reasoning else {"content": text}
        return sse(self._envelope([_choice_delta(delta, finish_reason)]))

    def body(self, content: str, reasoning: str | None, finish_reason: str,
             use: dict[str, Any]) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": []}
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None,
                                  "finish_reason": finish_reason, "stop_reason": None}
        return self._body("chat.completion", choice, use)


class TextFormatter(Formatter):
    """Completions: ``text`` choices in chunks and body."""

    chunk_object = "text_completion"

    def token_chunk(self, text: str, reasoning: bool, finish_reason: str | None) -> bytes:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                  "stop_reason": None}
        return sse(self._envelope([choice]))

    def body(self, content: str, reasoning: str | None, finish_reason: str,
             use: dict[str, Any]) -> bytes:
        choice = {"index": 0, "text": (reasoning or "") + content, "logprobs": None,
                  "finish_reason": finish_reason, "stop_reason": None,
                  "prompt_logprobs": None}
        return self._body("text_completion", choice, use)


def _choice_delta(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
