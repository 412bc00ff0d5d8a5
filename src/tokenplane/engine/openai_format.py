"""The JSON shapes vLLM returns for chat and completions (whole bodies and SSE chunks)."""

from __future__ import annotations

from typing import Any

import orjson

from tokenplane.engine.logprobs import TokenLogprob, chat_entry, chat_logprobs, text_logprobs
from tokenplane.engine.planning import ChoicePlan

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
    body_object = ""

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

    def role_chunk(self, index: int) -> bytes | None:
        """The chunk a choice's stream opens with, if the shape has one."""
        return None

    def token_chunk(self, index: int, text: str, reasoning: bool, finish_reason: str | None,
                    logprob: TokenLogprob | None = None, offset: int = 0) -> bytes:
        """One token's chunk; ``offset``: characters of the choice's text before it."""
        raise NotImplementedError

    def call_chunk(self, index: int, call: dict[str, Any], finish_reason: str | None) -> bytes:
        """A tool call's piece (chat only)."""
        raise NotImplementedError

    def finish_chunk(self, index: int, finish_reason: str) -> bytes:
        """A choice's last chunk when its last token showed nothing of its own."""
        return self.token_chunk(index, "", False, finish_reason)

    def usage_chunk(self, use: dict[str, Any]) -> bytes:
        obj = self._envelope([])
        obj["usage"] = use
        return sse(obj)

    def choice(self, index: int, plan: ChoicePlan, upto: int) -> dict[str, Any]:
        """A choice of the whole body: the first ``upto`` tokens of ``plan``."""
        raise NotImplementedError

    def body(self, choices: list[dict[str, Any]], use: dict[str, Any]) -> bytes:
        return orjson.dumps({"id": self.rid, "object": self.body_object,
                             "created": self.created, "model": self.model,
                             "choices": choices, "usage": use})


class ChatFormatter(Formatter):
    """Chat completions: ``delta`` chunks, a ``message`` body."""

    chunk_object = "chat.completion.chunk"
    body_object = "chat.completion"

    def role_chunk(self, index: int) -> bytes | None:
        """Chat streams open with the assistant role (vLLM sends it with the first token)."""
        delta = {"role": "assistant", "content": ""}
        return sse(self._envelope([_choice_delta(index, delta, None)]))

    def token_chunk(self, index: int, text: str, reasoning: bool, finish_reason: str | None,
                    logprob: TokenLogprob | None = None, offset: int = 0) -> bytes:
        delta = {"reasoning_content": text} if reasoning else {"content": text}
        ch = _choice_delta(index, delta, finish_reason)
        if logprob is not None:
            ch["logprobs"] = {"content": [chat_entry(logprob)], "refusal": None}
        return sse(self._envelope([ch]))

    def finish_chunk(self, index: int, finish_reason: str) -> bytes:
        return sse(self._envelope([_choice_delta(index, {}, finish_reason)]))

    def call_chunk(self, index: int, call: dict[str, Any], finish_reason: str | None) -> bytes:
        return sse(self._envelope([_choice_delta(index, {"tool_calls": [call]}, finish_reason)]))

    def choice(self, index: int, plan: ChoicePlan, upto: int) -> dict[str, Any]:
        calls = plan.call_bodies() if plan.calls else []
        content: str | None = plan.content(upto)
        if calls and not content:
            content = None
        message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": calls}
        if plan.reasons:
            message["reasoning_content"] = plan.reasoning_text()
        lps = chat_logprobs(plan.content_logprobs()) if plan.logprobs is not None else None
        return {"index": index, "message": message, "logprobs": lps,
                "finish_reason": plan.finish, "stop_reason": plan.stop_sequence}


class TextFormatter(Formatter):
    """Completions: ``text`` choices in chunks and body."""

    chunk_object = "text_completion"
    body_object = "text_completion"

    def token_chunk(self, index: int, text: str, reasoning: bool, finish_reason: str | None,
                    logprob: TokenLogprob | None = None, offset: int = 0) -> bytes:
        lps = text_logprobs([logprob], offset) if logprob is not None else None
        choice = {"index": index, "text": text, "logprobs": lps, "finish_reason": finish_reason,
                  "stop_reason": None}
        return sse(self._envelope([choice]))

    def choice(self, index: int, plan: ChoicePlan, upto: int) -> dict[str, Any]:
        text = plan.reasoning_text() + plan.content(upto)
        lps = text_logprobs(plan.content_logprobs(), len(plan.reasoning_text())) \
            if plan.logprobs is not None else None
        return {"index": index, "text": text, "logprobs": lps,
                "finish_reason": plan.finish, "stop_reason": plan.stop_sequence,
                "prompt_logprobs": None}


def _choice_delta(index: int, delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
