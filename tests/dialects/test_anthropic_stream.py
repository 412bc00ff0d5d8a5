"""Canonical chat chunks as Anthropic Messages stream events."""

from __future__ import annotations

from typing import Any

from tests.dialects.anthropic_sse import accumulate, checked, frames
from tokenplane.dialects.anthropic.stream import MessagesStream
from tokenplane.dialects.usage import Usage
from tokenplane.errors import GatewayError


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None,
          usage: dict[str, Any] | None = None, **choice: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "created": 1,
                         "model": "m", "choices": []}
    if delta is not None or finish is not None:
        c["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish,
                         **choice}]
    if usage is not None:
        c["usage"] = usage
    return c


def run(chunks: list[dict[str, Any]], input_usage: Usage | None = None,
        final: Usage | None = None) -> bytes:
    s = MessagesStream(model="claude-x", message_id="msg_1", input_usage=input_usage)
    out = s.start()
    for c in chunks:
        out += s.feed(c)
    return out + s.finish(final)


def test_text_stream() -> None:
    raw = run([chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}),
               chunk({"content": "lo"}), chunk({}, "stop"),
               chunk(usage={"prompt_tokens": 12, "completion_tokens": 2,
                            "prompt_tokens_details": {"cached_tokens": 2}})],
              input_usage=Usage(input=12, cached=2))
    events = checked(raw)
    assert [e for e, _ in events] == [
        "message_start", "content_block_start", "content_block_delta",
        "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["usage"]["input_tokens"] == 10 and start["usage"]["output_tokens"] == 1
    assert start["usage"]["cache_read_input_tokens"] == 2
    delta = events[5][1]
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"] == {"input_tokens": 10, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 2, "output_tokens": 2}
    msg = accumulate(raw)
    assert msg["content"] == [{"type": "text", "text": "Hello"}]
    assert msg["stop_reason"] == "end_turn" and msg["usage"]["output_tokens"] == 2


def test_thinking_text_and_tools() -> None:
    raw = run([
        chunk({"role": "assistant", "reasoning_content": "let me "}),
        chunk({"reasoning_content": "think"}),
        chunk({"content": "Calling."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                               "function": {"name": "get", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"name": "put",
                                                        "arguments": '{"x":1}'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "late"}}]}),  # dropped
        chunk({}, "tool_calls"),
    ], final=Usage(input=20, output=9))
    checked(raw)
    msg = accumulate(raw)
    assert [b["type"] for b in msg["content"]] == ["thinking", "text", "tool_use", "tool_use"]
    assert msg["content"][0]["thinking"] == "let me think"
    assert msg["content"][2]["id"] == "call_a" and msg["content"][2]["input"] == {"city": "Paris"}
    assert msg["content"][3]["name"] == "put" and msg["content"][3]["input"] == {"x": 1}
    assert msg["content"][3]["id"].startswith("toolu_")
    assert msg["stop_reason"] == "tool_use"
    assert msg["usage"]["output_tokens"] == 9 and msg["usage"]["input_tokens"] == 20
    indexes = [d["index"] for e, d in frames(raw) if e == "content_block_start"]
    assert indexes == [0, 1, 2, 3]


def test_extension_signature_redacted_and_stop_sequence() -> None:
    raw = run([
        chunk({"reasoning_content": "hm"}),
        chunk({"x_anthropic": {"signature": "sig"}}),
        chunk({"x_anthropic": {"redacted_thinking": "opaque"}}),
        chunk({"content": "a"}),
        chunk({"x_anthropic": {"stop_sequence": "END"}}, "stop"),
    ])
    msg = accumulate(raw)
    assert msg["content"] == [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "a"}]
    assert msg["stop_reason"] == "stop_sequence" and msg["stop_sequence"] == "END"
    raw = run([chunk({"content": "a"}), chunk({}, "stop", stop_reason="##")])
    assert accumulate(raw)["stop_sequence"] == "##"


def test_finish_reasons_and_usage_fallbacks() -> None:
    raw = run([chunk({"content": "a"}), chunk({}, "length")], input_usage=Usage(input=7))
    msg = accumulate(raw)
    assert msg["stop_reason"] == "max_tokens"
    assert msg["usage"]["input_tokens"] == 7 and msg["usage"]["output_tokens"] == 0
    raw = run([chunk({"content": "a"}), chunk(usage={"completion_tokens": 4})],
              input_usage=Usage(input=9, cached=3))
    assert frames(raw)[-2][1]["usage"] == {"input_tokens": 6, "cache_creation_input_tokens": 0,
                                           "cache_read_input_tokens": 3, "output_tokens": 4}
    raw = run([])
    msg = accumulate(raw)
    assert msg["content"] == [] and msg["stop_reason"] == "end_turn"


def test_start_once_finish_once_and_feed_without_start() -> None:
    s = MessagesStream(model="m", message_id="msg_2", input_usage=None)
    out = s.feed(chunk({"content": "x"}))
    assert frames(out)[0][0] == "message_start"
    assert s.start() == b""
    end = s.finish()
    assert s.finish() == b"" and s.feed(chunk({"content": "y"})) == b""
    assert [e for e, _ in frames(end)] == ["content_block_stop", "message_delta",
                                           "message_stop"]


def test_ping_and_error() -> None:
    s = MessagesStream(model="m", message_id="msg_3", input_usage=None)
    assert frames(s.ping()) == [("ping", {"type": "ping"})]
    s.start()
    s.feed(chunk({"content": "x"}))
    out = s.error(GatewayError(503, "overloaded"), "req_9")
    assert frames(out) == [("error", {"type": "error", "request_id": "req_9", "error": {
        "type": "overloaded_error", "message": "overloaded"}})]


def test_other_choices_and_odd_chunks_ignored() -> None:
    raw = run([chunk({"content": "a"}), {"choices": [{"index": 1, "delta": {"content": "b"}}]},
               {"choices": None}, {"choices": ["x"]}, chunk({"content": ""})])
    assert accumulate(raw)["content"] == [{"type": "text", "text": "a"}]
