"""The Anthropic dialect at the edge: the canonical stream the pipeline yields (its
``data:`` chunks, the budget's closing chunk and comment, an upstream's error event,
``[DONE]``) rendered as Messages events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson

from tokenplane.dialects.anthropic.edge import ANTHROPIC, message_id
from tokenplane.dialects.base import AnswerInfo
from tokenplane.errors import GatewayError, envelope

INFO = AnswerInfo("claude-x", "req_abc", 11)


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def render(items: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    async def source() -> AsyncIterator[bytes]:
        for item in items:
            yield item

    async def run() -> bytes:
        return b"".join([x async for x in ANTHROPIC.stream(source(), INFO)])

    raw = asyncio.run(run())
    out = []
    for ev in raw.split(b"\n\n"):
        if ev:
            name, data = ev.split(b"\n", 1)
            out.append((name.removeprefix(b"event: ").decode(),
                        orjson.loads(data.removeprefix(b"data: "))))
    return out


def test_a_whole_stream_ends_with_message_stop() -> None:
    usage = b"data: " + orjson.dumps({"choices": [], "usage": {
        "prompt_tokens": 11, "completion_tokens": 2}}) + b"\n\n"
    events = render([chunk({"role": "assistant"}) + chunk({"content": "a"}),
                     chunk({"content": "b"}, "stop"), usage, b"data: [DONE]\n\n"])
    names = [n for n, _ in events]
    assert names[0] == "message_start" and names[-1] == "message_stop"
    start = events[0][1]["message"]
    assert start["id"] == message_id("req_abc") and start["model"] == "claude-x"
    assert start["usage"]["input_tokens"] == 11
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "end_turn" and delta["usage"]["output_tokens"] == 2


def test_a_budget_cut_is_max_tokens() -> None:
    cut = chunk({}, "length", tokenplane={"stopped_by": "budget"})
    events = render([chunk({"content": "a"}), cut + b": tokenplane stream ended by budget\n\n",
                     b"data: [DONE]\n\n"])
    delta = next(d for n, d in events if n == "message_delta")
    assert delta["delta"]["stop_reason"] == "max_tokens"
    assert events[-1][0] == "message_stop"


def test_an_upstream_failure_is_an_error_event() -> None:
    err = b"data: " + orjson.dumps(envelope(GatewayError(
        502, "upstream stream failed", code="upstream_error", type_="upstream_error"))) + b"\n\n"
    events = render([chunk({"content": "a"}), err, b"data: [DONE]\n\n"])
    names = [n for n, _ in events]
    assert names[-1] == "error" and "message_stop" not in names
    assert events[-1][1]["error"]["type"] == "overloaded_error"
