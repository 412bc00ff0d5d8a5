"""The reverse direction: canonical chat bodies as Messages requests, Messages answers
and stream events as chat completions and chunks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.dialects.test_anthropic_request import CC, conversation, req
from tokenplane.dialects.anthropic.backend import ChatChunks, to_chat_answer, to_messages_request
from tokenplane.dialects.anthropic.request import to_chat
from tokenplane.errors import GatewayError

openai = pytest.importorskip("openai")


def back(chat: dict[str, Any], default: int = 1024) -> dict[str, Any]:
    return to_messages_request(chat, default_max_tokens=default)


def test_messages_request_round_trip() -> None:
    body = req(
        system=[{"type": "text", "text": "s1"}, {"type": "text", "text": "s2",
                                                 "cache_control": CC}],
        messages=[*conversation()[:3], {"role": "assistant", "content": "fine"},
                  {"role": "user", "content": [
                      {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                   "data": "AAAA"}},
                      {"type": "image", "source": {"type": "url", "url": "https://x/i.png"}},
                      {"type": "document", "title": "T", "context": "c",
                       "source": {"type": "text", "media_type": "text/plain", "data": "dd"}},
                      {"type": "document", "title": "P", "cache_control": CC, "source": {
                          "type": "base64", "media_type": "application/pdf", "data": "JV"}},
                      {"type": "document", "source": {
                          "type": "base64", "media_type": "application/pdf", "data": "JV"}},
                  ]}],
        tools=[{"name": "get", "description": "d", "input_schema": {"type": "object"},
                "cache_control": CC}],
        tool_choice={"type": "tool", "name": "get", "disable_parallel_tool_use": True},
        thinking={"type": "enabled", "budget_tokens": 2000}, max_tokens=5000,
        temperature=1, top_k=3, stop_sequences=["X"], stream=True,
        metadata={"user_id": "u"}, service_tier="auto", container="c1")
    original = copy.deepcopy(body)
    again = back(to_chat(body))
    assert body == original
    # the tool results come back as one user message, results first
    want = copy.deepcopy(original)
    want["messages"][2]["content"] = [want["messages"][2]["content"][i] for i in (0, 2, 1)]
    want["messages"][2]["content"][0]["content"] = "sunny"
    want["messages"][2]["content"][1]["content"] = "a\nb"
    # an assistant's text blocks come back joined into one
    blocks = want["messages"][1]["content"]
    blocks[3:5] = [{"type": "text", "text": "Let me check."}]
    assert again == want


def test_assistant_variants_round_trip() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": [1, 2]},
             "cache_control": CC}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "r", "is_error": True}]},
        {"role": "assistant", "content": [{"type": "text", "text": "x", "cache_control": CC}]},
        {"role": "user", "content": "last"},
    ]
    assert back(to_chat(req(messages=messages)))["messages"] == messages


def test_plain_openai_body() -> None:
    chat = {
        "model": "m", "max_completion_tokens": 300, "temperature": 1.5, "top_p": 0.9,
        "stop": "END", "user": "u9", "n": 1, "seed": 3, "stream": False,
        "reasoning_effort": "high", "parallel_tool_calls": False,
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
            {"role": "user", "content": "a"},
            {"role": "user", "content": [{"type": "text", "text": "b"},
                                         {"type": "image_url",
                                          "image_url": {"url": "data:image/jpeg;base64,QQ"}},
                                         {"type": "file", "file": {
                                             "filename": "r.pdf",
                                             "file_data": "data:application/pdf;base64,JV"}}]},
            {"role": "assistant", "content": None, "reasoning_content": "unsigned",
             "tool_calls": [
                 {"id": "c1", "type": "function",
                  "function": {"name": "f", "arguments": '{"x":1}'}},
                 {"id": "c2", "type": "function", "function": {"name": "f",
                                                               "arguments": "oops"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r1"},
            {"role": "tool", "tool_call_id": "c2",
             "content": [{"type": "text", "text": "r2"}]},
            {"role": "user", "content": "next"},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    out = back(chat)
    assert out == {
        "model": "m", "max_tokens": 300, "temperature": 1, "top_p": 0.9,
        "stop_sequences": ["END"], "stream": False, "metadata": {"user_id": "u9"},
        "system": [{"type": "text", "text": "sys"}, {"type": "text", "text": "dev"}],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                             "data": "QQ"}},
                {"type": "document", "title": "r.pdf", "source": {
                    "type": "base64", "media_type": "application/pdf", "data": "JV"}}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "c1", "name": "f", "input": {"x": 1}},
                {"type": "tool_use", "id": "c2", "name": "f", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "r1"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "r2"},
                {"type": "text", "text": "next"}]},
        ],
        "tools": [{"name": "f", "input_schema": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    }  # no thinking: a budget under max_tokens (300) would be under Anthropic's 1024


def test_thinking_budgets_and_defaults() -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    assert back(base)["max_tokens"] == 1024 and "thinking" not in back(base)
    for effort, budget in [("low", 2048), ("medium", 8192), ("high", 24576)]:
        out = back({**base, "reasoning_effort": effort, "max_tokens": 30000})
        assert out["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert back({**base, "reasoning_effort": "high", "max_tokens": 5000})["thinking"] == {
        "type": "enabled", "budget_tokens": 4999}
    assert "thinking" not in back({**base, "reasoning_effort": "low", "max_tokens": 1000})
    assert "thinking" not in back({**base, "reasoning_effort": "minimal",
                                   "max_tokens": 9000})
    assert back({**base, "tool_choice": "none"})["tool_choice"] == {"type": "none"}
    assert back({**base, "tool_choice": "required"})["tool_choice"] == {"type": "any"}
    assert back({**base, "tool_choice": {"type": "function", "function": {"name": "g"}}})[
        "tool_choice"] == {"type": "tool", "name": "g"}


@pytest.mark.parametrize(("chat", "param"), [
    ({"messages": [{"role": "function", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [{"type": "file", "file": {"file_id": "f"}}]}]},
     "messages[0].content[0].file"),
    ({"messages": [], "tools": [{"type": "custom", "custom": {}}]}, "tools[0].type"),
])
def test_what_cannot_go(chat: dict[str, Any], param: str) -> None:
    with pytest.raises(GatewayError) as e:
        back(chat)
    assert e.value.status == 400 and e.value.param == param


def message(content: list[dict[str, Any]], stop: str = "end_turn",
            seq: str | None = None) -> dict[str, Any]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": content, "stop_reason": stop, "stop_sequence": seq,
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5,
                      "cache_creation_input_tokens": 2, "output_tokens": 7}}


def test_answer() -> None:
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "t", "signature": "s"},
              {"type": "redacted_thinking", "data": "d"},
              {"type": "text", "text": "a"}, {"type": "text", "text": "b"},
              {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"k": "é"}}]
    out = to_chat_answer(message(blocks, "tool_use"), created=5)
    openai.types.chat.ChatCompletion.model_validate(out)
    assert out["id"] == "msg_1" and out["created"] == 5 and out["model"] == "claude-x"
    choice = out["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant", "content": "ab", "reasoning_content": "t",
        "tool_calls": [{"id": "toolu_1", "type": "function",
                        "function": {"name": "f", "arguments": '{"k":"é"}'}}],
        "x_anthropic": {"thinking_blocks": blocks[:2]}}
    assert out["usage"]["prompt_tokens"] == 17 and out["usage"]["completion_tokens"] == 7
    assert out["usage"]["prompt_tokens_details"]["cached_tokens"] == 5


@pytest.mark.parametrize(("stop", "finish"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
    ("tool_use", "tool_calls"), ("refusal", "content_filter"), ("pause_turn", "stop"),
    (None, "stop"),
])
def test_answer_finish_reasons(stop: str | None, finish: str) -> None:
    out = to_chat_answer(message([], stop or "end_turn") | {"stop_reason": stop})
    assert out["choices"][0]["finish_reason"] == finish
    assert out["choices"][0]["message"]["content"] == ""


def test_answer_stop_sequence_kept() -> None:
    out = to_chat_answer(message([{"type": "text", "text": "x"}], "stop_sequence", "END"))
    assert out["choices"][0]["message"]["x_anthropic"] == {"stop_sequence": "END"}


def anthropic_events() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_9", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 20, "cache_read_input_tokens": 4,
                      "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
        ("ping", {"type": "ping"}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {
            "type": "thinking", "thinking": "", "signature": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "thinking_delta", "thinking": "hm"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "signature_delta", "signature": "sig"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("content_block_start", {"type": "content_block_start", "index": 1,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 1,
                                 "delta": {"type": "text_delta", "text": "Hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("content_block_start", {"type": "content_block_start", "index": 2, "content_block": {
            "type": "tool_use", "id": "toolu_5", "name": "f", "input": {}}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta", "partial_json": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta",
                                           "partial_json": '{"a":'}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 2,
                                 "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 2}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 15}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def test_stream_chunks() -> None:
    cc = ChatChunks(created=7)
    chunks = [c for e, d in anthropic_events() for c in cc.feed(e, d)]
    for c in chunks:
        openai.types.chat.ChatCompletionChunk.model_validate(c)
        assert c["id"] == "msg_9" and c["model"] == "claude-x" and c["created"] == 7
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas == [
        {"role": "assistant", "content": ""}, {"reasoning_content": "hm"},
        {"x_anthropic": {"signature": "sig"}}, {"content": "Hi"},
        {"tool_calls": [{"index": 0, "id": "toolu_5", "type": "function",
                         "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}, {}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["prompt_tokens"] == 24
    assert chunks[-1]["usage"]["completion_tokens"] == 15
    assert cc.usage is not None and cc.usage.cached == 4


def test_stream_error_and_stop_sequence() -> None:
    cc = ChatChunks()
    assert cc.feed("error", {"type": "error", "error": {
        "type": "overloaded_error", "message": "Overloaded"}}) == [{"error": {
            "message": "Overloaded", "type": "overloaded_error", "param": None,
            "code": "overloaded_error"}}]
    cc.feed(*anthropic_events()[0])
    out = cc.feed("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": "stop_sequence", "stop_sequence": "END"}, "usage": {
        "output_tokens": 3, "input_tokens": 30}})
    assert out[0]["choices"][0] == {"index": 0, "delta": {"x_anthropic": {
        "stop_sequence": "END"}}, "finish_reason": "stop"}
    assert out[1]["usage"]["prompt_tokens"] == 34  # message_delta's cumulative input wins
    assert cc.feed("content_block_delta", {"type": "content_block_delta", "index": 9,
                                           "delta": {"type": "input_json_delta",
                                                     "partial_json": "x"}}) == []
    assert cc.feed("content_block_start", {"type": "content_block_start", "index": 3,
                                           "content_block": {"type": "redacted_thinking",
                                                             "data": "d"}}) == [
        cc._chunk({"x_anthropic": {"redacted_thinking": "d"}})]


def test_tool_result_images_round_trip() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "AAAA"}}
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "f", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [
                {"type": "text", "text": "a"}, {**image, "cache_control": CC}]},
            {"type": "tool_result", "tool_use_id": "t2", "content": [image]},
            {"type": "text", "text": "more"}]},
    ]
    assert back(to_chat(req(messages=messages)))["messages"] == messages


def test_only_carried_fields_come_back() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5,
            "x_anthropic": {"fields": {"service_tier": "auto", "max_tokens": 99,
                                       "api_key": "no"}}}
    out = back(chat)
    assert out["service_tier"] == "auto" and out["max_tokens"] == 5 and "api_key" not in out
