"""Anthropic Messages requests checked and turned into the canonical chat body."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tokenplane.dialects.anthropic.request import (
    looks_like_messages,
    reasoning_effort,
    strip_extensions,
    to_chat,
)
from tokenplane.errors import GatewayError

CC = {"type": "ephemeral"}


def req(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "claude-x", "max_tokens": 100,
                            "messages": [{"role": "user", "content": "hi"}]}
    body.update(kw)
    return body


def err(body: Any) -> GatewayError:
    with pytest.raises(GatewayError) as e:
        to_chat(body)
    assert e.value.status == 400
    return e.value


def test_minimal_request() -> None:
    assert to_chat(req()) == {"model": "claude-x", "max_tokens": 100,
                              "messages": [{"role": "user", "content": "hi"}]}


def test_top_level_fields_map() -> None:
    chat = to_chat(req(system="be brief", temperature=0.5, top_p=1, top_k=5,
                       stop_sequences=["END"], stream=True, metadata={"user_id": "u1"},
                       service_tier="auto"))
    assert chat["messages"][0] == {"role": "system", "content": "be brief"}
    assert chat["temperature"] == 0.5 and chat["top_p"] == 1 and chat["top_k"] == 5
    assert chat["stop"] == ["END"]
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert chat["user"] == "u1" and "metadata" not in chat
    assert chat["x_anthropic"] == {"fields": {"service_tier": "auto"}}


def test_system_blocks_keep_cache_control() -> None:
    chat = to_chat(req(system=[{"type": "text", "text": "a"},
                               {"type": "text", "text": "b", "cache_control": CC}]))
    assert chat["messages"][0] == {"role": "system", "content": [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b", "x_anthropic": {"cache_control": CC}}]}


def test_user_blocks() -> None:
    content = [
        {"type": "text", "text": "look", "cache_control": CC},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                        "data": "doc text"}, "title": "T"},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": "JVBE"}},
    ]
    chat = to_chat(req(messages=[{"role": "user", "content": content}]))
    assert chat["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "look", "x_anthropic": {"cache_control": CC}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        {"type": "text", "text": "doc text", "x_anthropic": {"document": {"title": "T"}}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE",
                                  "filename": "document.pdf"}},
    ]}]


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm ", "signature": "sig1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "thinking": "ok", "signature": "sig2"},
            {"type": "text", "text": "Let me "},
            {"type": "text", "text": "check."},
            {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"city": "Zürich"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "text", "text": "and?"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "cache_control": CC,
             "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2"}]},
    ]


def test_assistant_and_tool_results() -> None:
    chat = to_chat(req(messages=conversation()))
    m = chat["messages"]
    assert m[1] == {
        "role": "assistant", "content": "Let me check.",
        "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get", "arguments": '{"city":"Zürich"}'}},
            {"id": "toolu_2", "type": "function",
             "function": {"name": "get", "arguments": "{}"}}],
        "reasoning_content": "hmm ok",
        "x_anthropic": {"thinking_blocks": conversation()[1]["content"][:3]},
    }
    assert m[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    assert m[3] == {"role": "tool", "tool_call_id": "toolu_2", "content": "a\nb",
                    "x_anthropic": {"is_error": True, "cache_control": CC}}
    assert m[4] == {"role": "user", "content": [{"type": "text", "text": "and?"}]}
    # nothing else in the last user message: no empty user message after the tool one
    assert m[5] == {"role": "tool", "tool_call_id": "toolu_2", "content": ""}
    assert len(m) == 6


def test_assistant_tool_calls_only_and_cache_control() -> None:
    chat = to_chat(req(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1},
             "cache_control": CC}]},
        {"role": "assistant", "content": [{"type": "text", "text": "y", "cache_control": CC}]},
    ]))
    assert chat["messages"][1]["content"] is None
    assert chat["messages"][1]["x_anthropic"] == {"tool_call_cache_control": {"t": CC}}
    assert chat["messages"][2]["content"] == [
        {"type": "text", "text": "y", "x_anthropic": {"cache_control": CC}}]


def test_tools_and_tool_choice() -> None:
    tools = [{"name": "get", "description": "d", "input_schema": {"type": "object"},
              "cache_control": CC},
             {"type": "custom", "name": "put", "input_schema": {"type": "object"}}]
    chat = to_chat(req(tools=tools, tool_choice={"type": "any",
                                                 "disable_parallel_tool_use": True}))
    assert chat["tools"] == [
        {"type": "function", "function": {"name": "get", "description": "d",
                                          "parameters": {"type": "object"}},
         "x_anthropic": {"cache_control": CC}},
        {"type": "function", "function": {"name": "put", "parameters": {"type": "object"}}}]
    assert chat["tool_choice"] == "required" and chat["parallel_tool_calls"] is False
    for tc, want in [({"type": "auto"}, "auto"), ({"type": "none"}, "none"),
                     ({"type": "tool", "name": "get"},
                      {"type": "function", "function": {"name": "get"}})]:
        chat = to_chat(req(tools=tools, tool_choice=tc))
        assert chat["tool_choice"] == want and "parallel_tool_calls" not in chat


def test_thinking() -> None:
    for budget, effort in [(1024, "low"), (4095, "low"), (4096, "medium"),
                           (16383, "medium"), (16384, "high")]:
        th = {"type": "enabled", "budget_tokens": budget}
        chat = to_chat(req(max_tokens=20000, thinking=th))
        assert chat["reasoning_effort"] == effort == reasoning_effort(budget)
        assert chat["x_anthropic"]["thinking"] == th
    chat = to_chat(req(thinking={"type": "disabled"}))
    assert "reasoning_effort" not in chat
    assert chat["x_anthropic"] == {"thinking": {"type": "disabled"}}


def test_gateway_extensions_pass() -> None:
    chat = to_chat(req(metadata={"user_id": "u", "tokenplane_session": "s"},
                       tokenplane={"context": {"documents": []}}))
    assert chat["metadata"] == {"tokenplane_session": "s"}
    assert chat["tokenplane"] == {"context": {"documents": []}}


@pytest.mark.parametrize(("body", "param"), [
    (req(model=None), "model"),
    (req(model=3), "model"),
    ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
    (req(max_tokens=0), "max_tokens"),
    (req(max_tokens="5"), "max_tokens"),
    (req(max_tokens=True), "max_tokens"),
    (req(messages=[]), "messages"),
    (req(messages="hi"), "messages"),
    (req(messages=[{"role": "bot", "content": "x"}]), "messages[0].role"),
    (req(messages=[{"role": "user", "content": 5}]), "messages[0].content"),
    (req(messages=[{"role": "user", "content": [{"type": "video"}]}]),
     "messages[0].content[0].type"),
    (req(messages=[{"role": "user", "content": [{"text": "x"}]}]),
     "messages[0].content[0].type"),
    (req(messages=[{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b",
                                                 "input": {}}]}]),
     "messages[0].content[0].type"),
    (req(messages=[{"role": "user", "content": [{"type": "text", "text": 1}]}]),
     "messages[0].content[0].text"),
    (req(messages=[{"role": "user", "content": "x"}, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "nope", "content": "r"}]}]),
     "messages[1].content[0].tool_use_id"),
    (req(messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/bmp",
                                     "data": "x"}}]}]),
     "messages[0].content[0].source.media_type"),
    (req(thinking={"type": "enabled", "budget_tokens": 1023}, max_tokens=5000),
     "thinking.budget_tokens"),
    (req(thinking={"type": "enabled", "budget_tokens": 2000}, max_tokens=2000),
     "thinking.budget_tokens"),
    (req(system=5), "system"),
    (req(system=[{"type": "image"}]), "system[0].type"),
    (req(temperature=1.5), "temperature"),
    (req(top_p=-0.1), "top_p"),
    (req(top_k=-1), "top_k"),
    (req(top_k=1.5), "top_k"),
    (req(stop_sequences="x"), "stop_sequences"),
    (req(stop_sequences=["a", 1]), "stop_sequences[1]"),
    (req(stream="yes"), "stream"),
    (req(metadata={"other": "x"}), "metadata.other"),
    (req(metadata={"user_id": 3}), "metadata.user_id"),
    (req(tools=[{"name": "a"}]), "tools[0].input_schema"),
    (req(tools=[{"name": "a b", "input_schema": {}}]), "tools[0].name"),
    (req(tool_choice={"type": "some"}), "tool_choice.type"),
    (req(tool_choice={"type": "tool"}), "tool_choice.name"),
    (req(bogus=1), "bogus"),
    (req(messages=[{"role": "user", "content": [{"type": "text", "text": "x",
                                                 "cache_control": {"type": "forever"}}]}]),
     "messages[0].content[0].cache_control.type"),
])
def test_invalid_requests(body: dict[str, Any], param: str) -> None:
    e = err(body)
    assert e.param == param, e.message
    assert e.type == "invalid_request_error"


def test_server_tools_refused() -> None:
    e = err(req(tools=[{"type": "web_search_20250305", "name": "web_search"}]))
    assert e.param == "tools[0].type" and "server tools" in e.message


def test_system_messages_inside_messages_are_per_turn_instructions() -> None:
    # Claude Code's per-turn-control beta: a system message among the turns
    chat = to_chat(req(messages=[{"role": "user", "content": "y"},
                                 {"role": "system", "content": [{"type": "text", "text": "z"}]},
                                 {"role": "user", "content": "w"}]))
    assert [m["role"] for m in chat["messages"]] == ["user", "system", "user"]
    assert chat["messages"][1]["content"] == [{"type": "text", "text": "z"}]


def test_claude_codes_user_id_names_its_account() -> None:
    uid = '{"device_id":"dev1","account_uuid":"acct-9","session_id":"s"}'
    assert to_chat(req(metadata={"user_id": uid}))["user"] == "acct-9"
    assert to_chat(req(metadata={"user_id": "plain"}))["user"] == "plain"


@pytest.mark.parametrize("body", [
    req(messages=[{"role": "tool", "content": "x", "tool_call_id": "a"}]),
    req(messages=[{"role": "developer", "content": "x"}]),
    req(messages=[{"role": "assistant", "content": None, "tool_calls": []}]),
    req(max_completion_tokens=5),
    req(n=2),
    req(response_format={"type": "json_object"}),
    req(stream_options={"include_usage": True}),
    {"model": "gpt", "messages": [{"role": "system", "content": "x"}]},
])
def test_chat_completions_bodies_are_pointed_elsewhere(body: dict[str, Any]) -> None:
    e = err(body)
    assert "Chat Completions" in e.message and "/v1/chat/completions" in e.message
    assert e.code == "wrong_api"


def test_not_an_object() -> None:
    assert err([1]).status == 400


def test_looks_like_messages() -> None:
    assert looks_like_messages(req(system="x"))
    assert looks_like_messages(req(stop_sequences=["a"]))
    assert looks_like_messages({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a"}]}]})
    assert looks_like_messages({"messages": [{"role": "assistant", "content": [
        {"type": "thinking", "thinking": "", "signature": ""}]}]})
    assert not looks_like_messages({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "x"}]}]})
    assert not looks_like_messages(None)
    assert not looks_like_messages({"messages": ["x", {"content": 3}]})


def test_strip_extensions() -> None:
    plain = to_chat(req())
    assert strip_extensions(plain) is plain
    body = to_chat(req(system=[{"type": "text", "text": "s", "cache_control": CC}],
                       messages=conversation(),
                       tools=[{"name": "get", "input_schema": {}, "cache_control": CC}],
                       thinking={"type": "enabled", "budget_tokens": 2000}, max_tokens=4000))
    before = copy.deepcopy(body)
    out = strip_extensions(body)
    assert body == before  # not changed in place
    assert "x_anthropic" not in repr(out)
    assert out["messages"][3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    assert out["messages"][3] is body["messages"][3]  # untouched messages are shared
    assert out["tools"][0] == {"type": "function",
                               "function": {"name": "get", "parameters": {}}}


def test_images_in_tool_results_go_to_the_user_message() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "AAAA"}}
    chat = to_chat(req(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "text", "text": "shot:"}, {**image, "cache_control": CC}]}]},
    ]))
    assert chat["messages"][2:] == [
        {"role": "tool", "tool_call_id": "t", "content": "shot:"},
        {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"},
             "x_anthropic": {"tool_result": "t", "cache_control": CC}}]}]
    e = err(req(messages=[
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
            {"type": "document", "source": {}}]}]}]))
    assert e.param == "messages[1].content[0].content[0].type"
