"""The Messages stream's path for plain text chunks (``MessagesStream._more_text``, the
common chunk rendered without the general walk) gives the same bytes as the general
path, on plain chunks and on every kind of chunk it must hand over."""

from __future__ import annotations

from typing import Any

import pytest

from tokenplane.dialects.anthropic.sse import frame
from tokenplane.dialects.anthropic.stream import MessagesStream
from tokenplane.dialects.usage import Usage


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    choice.update(extra.pop("choice", {}))
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [choice], **extra}


CHUNKS: list[dict[str, Any]] = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Hello"}),
    chunk({"content": " wörld \"quoted\" \n 🙂"}),
    chunk({"role": "assistant", "content": " again"}),
    chunk({"content": ""}),
    chunk({"content": None}),
    chunk({"content": 5}),
    chunk({}),
    chunk({"content": " usage too"}, usage={"prompt_tokens": 3, "completion_tokens": 2}),
    chunk({"content": " stop"}, choice={"stop_reason": "END"}),
    chunk({"content": " ext", "x_anthropic": {"stop_sequence": "##"}}),
    chunk({"content": " ext2"}, choice={"x_anthropic": {"stop_sequence": "%%"}}),
    chunk({"content": " reason", "reasoning_content": "hmm"}),
    chunk({"content": " more"}),
    chunk({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "f",
                                                                  "arguments": "{}"}}]}),
    chunk({"content": " after the tool"}),
    {"id": "c", "choices": [{"index": 1, "delta": {"content": " other choice"}}]},
    {"id": "c", "choices": [{"index": 0, "delta": {"content": " a"}},
                            {"index": 0, "delta": {"content": " b"}}]},
    chunk({"content": " last"}, finish="stop"),
    {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9}},
]


def render(chunks: list[dict[str, Any]], general_only: bool) -> list[bytes]:
    s = MessagesStream(model="m", message_id="msg_1", input_usage=Usage(input=3))
    if general_only:
        s._more_text = lambda chunk: None  # type: ignore[method-assign]
    return [s.start()] + [s.feed(c) for c in chunks] + [s.finish()]


@pytest.mark.parametrize("start", range(len(CHUNKS)))
def test_the_text_path_renders_as_the_general_one(start: int) -> None:
    chunks = CHUNKS[start:] + CHUNKS[:start]  # every chunk after every other
    assert render(chunks, general_only=False) == render(chunks, general_only=True)


def test_a_text_delta_frame_is_the_generic_frame() -> None:
    s = MessagesStream(model="m", message_id="msg_1", input_usage=None)
    s.feed(chunk({"content": "a"}))
    for text in ("b", "\u2028", "\x00", "\"\\", "é🙂"):
        assert s.feed(chunk({"content": text})) == frame("content_block_delta", {
            "type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": text}})
