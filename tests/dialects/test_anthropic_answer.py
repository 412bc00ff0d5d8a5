"""Canonical chat answers as Anthropic Messages answers."""

from __future__ import annotations

from typing import Any

import pytest

from tokenplane.dialects.anthropic.answer import stop_reason, to_messages
from tokenplane.dialects.usage import Usage

anthropic = pytest.importorskip("anthropic")


def completion(message: dict[str, Any], finish: str | None = "stop",
               usage: dict[str, Any] | None = None, **choice: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                           "model": "m", "choices": [
                               {"index": 0, "message": {"role": "assistant", **message},
                                "finish_reason": finish, **choice}]}
    if usage is not None:
        obj["usage"] = usage
    return obj


def convert(obj: dict[str, Any], usage: Usage | None = None) -> dict[str, Any]:
    out = to_messages(obj, model="claude-x", message_id="msg_1", usage=usage)
    anthropic.types.Message.model_validate(out)
    return out


def test_text_answer() -> None:
    out = convert(completion({"content": "Hello"},
                             usage={"prompt_tokens": 10, "completion_tokens": 3,
                                    "prompt_tokens_details": {"cached_tokens": 4}}))
    assert out == {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                   "content": [{"type": "text", "text": "Hello"}], "stop_reason": "end_turn",
                   "stop_sequence": None,
                   "usage": {"input_tokens": 6, "cache_creation_input_tokens": 0,
                             "cache_read_input_tokens": 4,
                             "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                                "ephemeral_1h_input_tokens": 0},
                             "output_tokens": 3}}


def test_thinking_text_and_tools_in_order() -> None:
    out = convert(completion({
        "content": "Checking.", "reasoning_content": "think",
        "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "get", "arguments": '{"city":"Paris"}'}},
            {"type": "function", "function": {"name": "put", "arguments": "[1]"}},
            {"type": "function", "function": {"name": "bad", "arguments": "{not json"}},
        ]}, finish="tool_calls"), usage=Usage(input=5, output=7))
    assert [b["type"] for b in out["content"]] == ["thinking", "text", "tool_use",
                                                   "tool_use", "tool_use"]
    assert out["content"][0] == {"type": "thinking", "thinking": "think", "signature": ""}
    assert out["content"][2] == {"type": "tool_use", "id": "call_a", "name": "get",
                                 "input": {"city": "Paris"}}
    ids = [b["id"] for b in out["content"][3:]]
    assert all(i.startswith("toolu_") for i in ids) and len(set(ids)) == 2
    # deterministic
    again = convert(completion({"tool_calls": [
        {}, {"type": "function", "function": {"name": "put", "arguments": "[1]"}}]}))
    assert again["content"][1]["id"] == ids[0]
    assert out["content"][3]["input"] == {} and out["content"][4]["input"] == {}
    assert out["stop_reason"] == "tool_use"
    assert out["usage"]["input_tokens"] == 5 and out["usage"]["output_tokens"] == 7


def test_verbatim_thinking_blocks() -> None:
    kept = [{"type": "thinking", "thinking": "a", "signature": "s"},
            {"type": "redacted_thinking", "data": "d"}]
    out = convert(completion({"content": "x", "reasoning_content": "a",
                              "x_anthropic": {"thinking_blocks": kept}}))
    assert out["content"][:2] == kept


@pytest.mark.parametrize(("finish", "calls", "want"), [
    ("stop", False, "end_turn"), ("length", False, "max_tokens"),
    ("tool_calls", True, "tool_use"), ("stop", True, "tool_use"),
    ("content_filter", False, "refusal"), (None, False, "end_turn"),
    ("length", True, "max_tokens"), ("weird", False, "end_turn"),
    ("tool_calls", False, "end_turn"),
])
def test_stop_reason(finish: str | None, calls: bool, want: str) -> None:
    assert stop_reason(finish, calls) == want


def test_stop_sequence() -> None:
    out = convert(completion({"content": "a", "x_anthropic": {"stop_sequence": "END"}}))
    assert out["stop_reason"] == "stop_sequence" and out["stop_sequence"] == "END"
    out = convert(completion({"content": "a"}, stop_reason="###"))  # vLLM's field
    assert out["stop_reason"] == "stop_sequence" and out["stop_sequence"] == "###"
    out = convert(completion({"content": "a"}, finish="length", stop_reason="###"))
    assert out["stop_reason"] == "max_tokens" and out["stop_sequence"] is None


def test_empty_and_odd_answers() -> None:
    out = convert({"choices": []})
    assert out["content"] == [] and out["stop_reason"] == "end_turn"
    assert out["usage"]["input_tokens"] == 0 and out["usage"]["output_tokens"] == 0
    out = convert(completion({"content": [{"type": "text", "text": "a"},
                                          {"type": "text", "text": "b"}]}))
    assert out["content"] == [{"type": "text", "text": "ab"}]
    out = convert(completion({"content": None, "refusal": "no"}, finish="content_filter"))
    assert out["content"] == [{"type": "text", "text": "no"}]
    assert out["stop_reason"] == "refusal"
    out = convert(completion({"content": ""}, usage={"input_tokens": 3, "output_tokens": 2}))
    assert out["content"] == [] and out["usage"]["input_tokens"] == 3
