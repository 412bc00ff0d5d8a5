"""Round trips between the canonical chat answers and Anthropic's Messages answers and
streams, on generated answers: text, tool calls and their arguments, stop reasons and
usage survive both ways."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dialects.anthropic_sse import frames
from tokenplane.dialects.anthropic.answer import to_messages
from tokenplane.dialects.anthropic.backend import ChatChunks, to_chat_answer, to_messages_request
from tokenplane.dialects.anthropic.request import to_chat
from tokenplane.dialects.anthropic.stream import MessagesStream
from tokenplane.dialects.usage import Usage

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
name = st.from_regex(r"[a-zA-Z0-9_-]{1,20}", fullmatch=True)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8)
arguments = st.dictionaries(text, json_value, max_size=4)


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    cached = draw(st.integers(0, 10_000))
    w5 = draw(st.integers(0, 10_000))
    w1 = draw(st.integers(0, 10_000))
    return Usage(input=cached + w5 + w1 + draw(st.integers(0, 100_000)),
                 output=draw(st.integers(0, 100_000)), cached=cached,
                 cache_write_5m=w5, cache_write_1h=w1)


@st.composite
def chat_answers(draw: st.DrawFn) -> dict[str, Any]:
    calls = [{"id": f"call_{i}", "type": "function",
              "function": {"name": draw(name), "arguments": json.dumps(draw(arguments))}}
             for i in range(draw(st.integers(0, 3)))]
    finish = draw(st.sampled_from(["tool_calls", "length"] if calls
                                  else ["stop", "length", "content_filter"]))
    message: dict[str, Any] = {"role": "assistant", "content": draw(text)}
    if calls:
        message["tool_calls"] = calls
    reasoning = draw(text)
    if reasoning:
        message["reasoning_content"] = reasoning
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": draw(usages()).to_openai()}


def chat_summary(obj: dict[str, Any]) -> tuple[Any, ...]:
    m = obj["choices"][0]["message"]
    calls = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
             for c in m.get("tool_calls", [])]
    return (m.get("content") or "", m.get("reasoning_content") or "", calls,
            obj["choices"][0]["finish_reason"], Usage.read(obj["usage"]))


@SETTINGS
@given(chat_answers())
def test_chat_messages_chat(obj: dict[str, Any]) -> None:
    messages = to_messages(obj, model="claude-x", message_id="msg_1", usage=None)
    assert chat_summary(to_chat_answer(messages)) == chat_summary(obj)


@st.composite
def messages_answers(draw: st.DrawFn) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 2))):
        if draw(st.booleans()):
            blocks.append({"type": "thinking", "thinking": draw(text),
                           "signature": draw(name)})
        else:
            blocks.append({"type": "redacted_thinking", "data": draw(name)})
    said = draw(text)
    if said:
        blocks.append({"type": "text", "text": said})
    for i in range(draw(st.integers(0, 3))):
        blocks.append({"type": "tool_use", "id": f"toolu_{i}", "name": draw(name),
                       "input": draw(arguments)})
    has_calls = any(b["type"] == "tool_use" for b in blocks)
    stop = draw(st.sampled_from(["tool_use", "max_tokens"] if has_calls
                                else ["end_turn", "max_tokens", "stop_sequence", "refusal"]))
    seq = draw(name) if stop == "stop_sequence" else None
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": blocks, "stop_reason": stop, "stop_sequence": seq,
            "usage": draw(usages()).to_anthropic()}


@SETTINGS
@given(messages_answers())
def test_messages_chat_messages(obj: dict[str, Any]) -> None:
    back = to_messages(to_chat_answer(obj), model="claude-x", message_id="msg_1", usage=None)
    assert back == obj


@st.composite
def chat_streams(draw: st.DrawFn) -> tuple[list[dict[str, Any]], Usage]:
    """A generated chat answer's chunks (fragments split at random) and its usage."""
    def cut(s: str) -> list[str]:
        points = sorted(draw(st.sets(st.integers(1, max(1, len(s) - 1)), max_size=3)))
        pieces = [s[a:b] for a, b in zip([0, *points], [*points, len(s)], strict=True)]
        return [p for p in pieces if p]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"reasoning_content": p}) for p in cut(draw(text))]
    chunks += [chunk({"content": p}) for p in cut(draw(text))]
    n_calls = draw(st.integers(0, 3))
    for i in range(n_calls):
        args = json.dumps(draw(arguments))
        chunks.append(chunk({"tool_calls": [{"index": i, "id": f"call_{i}", "type": "function",
                                             "function": {"name": draw(name),
                                                          "arguments": ""}}]}))
        chunks += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                   for p in cut(args)]
    finish = draw(st.sampled_from(["tool_calls", "length"] if n_calls
                                  else ["stop", "length", "content_filter"]))
    chunks.append(chunk({}, finish))
    usage = draw(usages())
    chunks.append({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                   "choices": [], "usage": usage.to_openai()})
    return chunks, usage


def stream_summary(chunks: list[dict[str, Any]]) -> tuple[Any, ...]:
    content, reasoning, finish, usage = "", "", None, None
    calls: dict[int, list[Any]] = {}
    for c in chunks:
        if c.get("usage"):
            usage = Usage.read(c["usage"])
        for choice in c["choices"]:
            d = choice["delta"]
            content += d.get("content") or ""
            reasoning += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls", []):
                call = calls.setdefault(tc["index"], [None, None, ""])
                call[0] = tc.get("id") or call[0]
                call[1] = tc.get("function", {}).get("name") or call[1]
                call[2] += tc.get("function", {}).get("arguments") or ""
            finish = choice["finish_reason"] or finish
    tool_calls = [(i, n, json.loads(a)) for _, (i, n, a) in sorted(calls.items())]
    return content, reasoning, tool_calls, finish, usage


@SETTINGS
@given(chat_streams())
def test_chat_stream_messages_stream_chat(generated: tuple[list[dict[str, Any]], Usage]) -> None:
    chunks, usage = generated
    stream = MessagesStream(model="claude-x", message_id="msg_1",
                            input_usage=Usage(input=usage.input, cached=usage.cached,
                                              cache_write_5m=usage.cache_write_5m,
                                              cache_write_1h=usage.cache_write_1h))
    raw = stream.start() + b"".join(stream.feed(c) for c in chunks) + stream.finish()
    back = ChatChunks()
    again = [c for event, data in frames(raw) for c in back.feed(event, data)]
    assert stream_summary(again) == stream_summary(chunks)
    assert back.usage == usage


@st.composite
def messages_requests(draw: st.DrawFn) -> dict[str, Any]:
    """A conversation of user text, assistant text and tool calls, and their results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(text) or "q"}]
    for turn in range(draw(st.integers(0, 3))):
        blocks: list[dict[str, Any]] = []
        said = draw(text)
        if said:
            blocks.append({"type": "text", "text": said})
        ids = [f"toolu_{turn}_{i}" for i in range(draw(st.integers(0, 2)))]
        blocks += [{"type": "tool_use", "id": i, "name": draw(name), "input": draw(arguments)}
                   for i in ids]
        if not blocks:
            blocks.append({"type": "text", "text": "ok"})
        messages.append({"role": "assistant", "content": blocks})
        results: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": i, "content": draw(text)} for i in ids]
        messages.append({"role": "user",
                         "content": [*results, {"type": "text", "text": draw(text) or "go"}]})
    return {"model": "claude-x", "max_tokens": draw(st.integers(1, 100_000)),
            "messages": messages}


def as_blocks(body: dict[str, Any]) -> dict[str, Any]:
    """The body with each string content as its text block (the two are the same)."""
    def blocks(content: Any) -> Any:
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content else []
        return content
    return {**body, "messages": [{**m, "content": blocks(m["content"])}
                                 for m in body["messages"]]}


@SETTINGS
@given(messages_requests())
def test_messages_request_chat_messages_request(body: dict[str, Any]) -> None:
    again = to_messages_request(to_chat(body), default_max_tokens=1)
    assert as_blocks(again) == as_blocks(body)
