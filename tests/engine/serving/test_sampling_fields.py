"""EngineService honours stop, n, seed, logprobs, response_format, tools and reasoning
models, with exact usage; bad values are 400s in OpenAI's envelope."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import orjson
import pytest

from tests.engine.serving.test_service import chat_body, events, parse_sse, post
from tokenplane.engine.behaviour import SimBehaviour
from tokenplane.engine.defaults import simple_prompt_ids
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.serving.service import EngineService
from tokenplane.tokens.base import Tokenizer

CHAT = "/v1/chat/completions"
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1,
                 "maxItems": 2, "uniqueItems": True},
        "home": {"$ref": "#/$defs/Place"},
        "score": {"anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                            {"type": "null"}]},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "email", "tags", "home", "score", "active"],
    "additionalProperties": False,
    "$defs": {"Place": {"type": "object", "properties": {
        "city": {"type": "string"}, "since": {"type": "string", "format": "date"},
        "geo": {"type": "array", "items": {"type": "number", "minimum": -90, "maximum": 90},
                "minItems": 2, "maxItems": 2}},
        "required": ["city", "since", "geo"]}},
}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"},
                                     "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"]}}}
ADD = {"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"]}}}


async def ok(svc: EngineService, body: dict[str, Any], path: str = CHAT) -> dict[str, Any]:
    resp = await post(svc, path, body)
    assert resp.status == 200 and resp.body is not None, resp.body
    data: dict[str, Any] = orjson.loads(resp.body)
    return data


async def stream(svc: EngineService, body: dict[str, Any],
                 path: str = CHAT) -> list[dict[str, Any]]:
    resp = await post(svc, path, {**body, "stream": True,
                                  "stream_options": {"include_usage": True}})
    assert resp.status == 200
    return parse_sse(await events(resp))


def joined(chunks: list[dict[str, Any]], index: int, field: str = "content") -> str:
    return "".join(c["choices"][0]["delta"].get(field) or "" for c in chunks
                   if c["choices"] and c["choices"][0]["index"] == index)


def finish(chunks: list[dict[str, Any]], index: int) -> str | None:
    out = [c["choices"][0]["finish_reason"] for c in chunks
           if c["choices"] and c["choices"][0]["index"] == index
           and c["choices"][0]["finish_reason"]]
    assert len(out) == 1
    return out[0]


@pytest.fixture
async def reasoner(tokenizer: Tokenizer) -> AsyncIterator[EngineService]:
    svc = EngineService(get_profile("instant"), tokenizer, simple_prompt_ids(tokenizer),
                        "sim-deepseek-r1", behaviour=SimBehaviour(tool_call_rate=1.0))
    await svc.start()
    yield svc
    await svc.close()


# --- stop ------------------------------------------------------------------------------

async def test_stop_sequence_ends_the_text(service: EngineService, tokenizer: Tokenizer) -> None:
    plain = await ok(service, chat_body("Tell me a story"))
    text = plain["choices"][0]["message"]["content"]
    stopped = await ok(service, chat_body("Tell me a story", stop=["\n\n", "END"]))
    choice = stopped["choices"][0]
    assert choice["finish_reason"] == "stop"
    content = choice["message"]["content"]
    assert "\n\n" not in content and "END" not in content
    assert 0 < len(content) < len(text)
    # the tokens through the stop sequence were generated and are counted (as vLLM)
    completion = stopped["usage"]["completion_tokens"]
    stop_tokens = {len(tokenizer.encode("\n\n")), len(tokenizer.encode("END"))}
    assert completion - tokenizer.count(content) in stop_tokens
    # a stop string the words themselves contain cuts at its first occurrence
    cut = await ok(service, chat_body("Tell me a story", stop=" the"))
    assert " the" not in cut["choices"][0]["message"]["content"]
    assert cut["choices"][0]["finish_reason"] == "stop"


async def test_stop_in_a_stream_matches_the_body(service: EngineService) -> None:
    body = chat_body("Tell me a story", stop=["\n\n"], seed=3)
    whole = await ok(service, body)
    chunks = await stream(service, body)
    assert joined(chunks, 0) == whole["choices"][0]["message"]["content"]
    assert finish(chunks, 0) == "stop"
    assert chunks[-1]["usage"] == whole["usage"]


async def test_stop_on_completions(service: EngineService) -> None:
    data = await ok(service, {"model": "sim-llama", "prompt": "Once upon a time",
                              "stop": "\n"}, "/v1/completions")
    assert data["choices"][0]["finish_reason"] == "stop"
    assert "\n" not in data["choices"][0]["text"]


# --- n and seeds -----------------------------------------------------------------------

async def test_n_choices_usage_counts_prompt_once(
    service: EngineService, tokenizer: Tokenizer
) -> None:
    one = await ok(service, chat_body("Name three colours", max_tokens=20))
    three = await ok(service, chat_body("Name three colours", max_tokens=20, n=3))
    assert [c["index"] for c in three["choices"]] == [0, 1, 2]
    texts = [c["message"]["content"] for c in three["choices"]]
    assert len(set(texts)) == 3  # sampled: the choices differ
    u = three["usage"]
    assert u["prompt_tokens"] == one["usage"]["prompt_tokens"]
    assert u["completion_tokens"] == 60 == sum(tokenizer.count(t) for t in texts)
    assert u["total_tokens"] == u["prompt_tokens"] + 60
    chunks = await stream(service, chat_body("Name three colours", max_tokens=20, n=3))
    assert [joined(chunks, i) for i in range(3)] == texts
    assert all(finish(chunks, i) == "length" for i in range(3))
    assert chunks[-1]["usage"]["completion_tokens"] == 60


async def test_seed_and_temperature_zero_are_deterministic(service: EngineService) -> None:
    async def text(**kw: Any) -> list[str]:
        data = await ok(service, chat_body("Pick a number", **kw))
        return [c["message"]["content"] for c in data["choices"]]

    assert await text(seed=7, temperature=1.0) == await text(seed=7, temperature=1.0)
    assert await text(seed=7) != await text(seed=8)
    greedy = await text(temperature=0, n=3)
    assert len(set(greedy)) == 1  # greedy: every choice is the same
    assert greedy[0] == (await text(temperature=0))[0]
    assert await text(seed=1, temperature=0) == await text(seed=2, temperature=0)


# --- logprobs --------------------------------------------------------------------------

async def test_chat_logprobs_shape(service: EngineService) -> None:
    data = await ok(service, chat_body("Hi", max_tokens=12, logprobs=True, top_logprobs=5))
    lp = data["choices"][0]["logprobs"]
    content = data["choices"][0]["message"]["content"]
    assert lp["refusal"] is None and len(lp["content"]) == 12
    assert "".join(e["token"] for e in lp["content"]) == content
    for e in lp["content"]:
        assert e["logprob"] <= 0 and bytes(e["bytes"]) == e["token"].encode()
        tops = [t["logprob"] for t in e["top_logprobs"]]
        assert len(tops) == 5 and tops == sorted(tops, reverse=True)
        assert e["top_logprobs"][0]["token"] == e["token"]
        assert sum(math.exp(x) for x in tops) <= 1 + 1e-9
    chunks = await stream(service, chat_body("Hi", max_tokens=12, logprobs=True,
                                             top_logprobs=2))
    streamed = [c["choices"][0]["logprobs"]["content"][0] for c in chunks
                if c["choices"] and c["choices"][0].get("logprobs")]
    assert [e["token"] for e in streamed] == [e["token"] for e in lp["content"]]
    plain = await ok(service, chat_body("Hi", max_tokens=12, logprobs=False))
    assert plain["choices"][0]["logprobs"] is None


async def test_completions_legacy_logprobs(service: EngineService) -> None:
    data = await ok(service, {"model": "sim-llama", "prompt": "Hello", "max_tokens": 6,
                              "logprobs": 3}, "/v1/completions")
    lp = data["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 6
    assert "".join(lp["tokens"]) == data["choices"][0]["text"]
    assert lp["text_offset"][0] == 0 and lp["text_offset"] == sorted(lp["text_offset"])
    for tok, value, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"],
                               strict=True):
        assert value <= 0 and len(top) == 3 and top[tok] == value
        assert list(top.values()) == sorted(top.values(), reverse=True)
    chunks = await stream(service, {"model": "sim-llama", "prompt": "Hello", "max_tokens": 6,
                                    "logprobs": 3}, "/v1/completions")
    streamed = [c["choices"][0]["logprobs"] for c in chunks if c["choices"]]
    assert [x["tokens"][0] for x in streamed] == lp["tokens"]
    assert [x["text_offset"][0] for x in streamed] == lp["text_offset"]


# --- JSON ------------------------------------------------------------------------------

async def test_json_object_and_json_schema(service: EngineService, tokenizer: Tokenizer) -> None:
    data = await ok(service, chat_body("Describe a person",
                                       response_format={"type": "json_object"}))
    content = data["choices"][0]["message"]["content"]
    assert isinstance(orjson.loads(content), dict)
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"]["completion_tokens"] == tokenizer.count(content)
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON,
                                                  "strict": True}}
    for seed in range(25):
        data = await ok(service, chat_body("Describe a person", response_format=fmt,
                                           seed=seed))
        content = data["choices"][0]["message"]["content"]
        jsonschema.validate(orjson.loads(content), PERSON)
        assert data["usage"]["completion_tokens"] == tokenizer.count(content)
    chunks = await stream(service, chat_body("Describe a person", response_format=fmt, n=2))
    for i in range(2):
        jsonschema.validate(orjson.loads(joined(chunks, i)), PERSON)


# --- tools -----------------------------------------------------------------------------

async def test_required_and_named_tools_always_call(service: EngineService) -> None:
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER, ADD)}
    for seed in range(10):
        data = await ok(service, chat_body("Weather in Paris?", tools=[WEATHER, ADD],
                                           tool_choice="required", seed=seed))
        choice = data["choices"][0]
        assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
        for call in choice["message"]["tool_calls"]:
            assert call["id"].startswith("call_") and call["type"] == "function"
            fn = call["function"]
            jsonschema.validate(orjson.loads(fn["arguments"]), schemas[fn["name"]])
    named = await ok(service, chat_body("Add 2 and 3", tools=[WEATHER, ADD],
                                        tool_choice={"type": "function",
                                                     "function": {"name": "add"}}))
    calls = named["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["add"]
    none = await ok(service, chat_body("Weather?", tools=[WEATHER], tool_choice="none"))
    assert none["choices"][0]["message"]["tool_calls"] == []
    assert none["choices"][0]["finish_reason"] in ("stop", "length")


async def test_parallel_calls_need_parallel_tool_calls(service: EngineService) -> None:
    counts = set()
    for seed in range(30):
        data = await ok(service, chat_body("Both please", tools=[WEATHER, ADD],
                                           tool_choice="required", seed=seed))
        counts.add(len(data["choices"][0]["message"]["tool_calls"]))
        data = await ok(service, chat_body("Both please", tools=[WEATHER, ADD],
                                           tool_choice="required", seed=seed,
                                           parallel_tool_calls=False))
        assert len(data["choices"][0]["message"]["tool_calls"]) == 1
    assert counts == {1, 2}


async def test_auto_rate_and_tool_results_end_the_loop(service: EngineService) -> None:
    called = 0
    for seed in range(40):
        data = await ok(service, chat_body("Weather in Rome?", tools=[WEATHER], seed=seed))
        called += bool(data["choices"][0]["message"]["tool_calls"])
    assert 8 <= called <= 32  # the default rate is 0.5
    msgs = [{"role": "user", "content": "Weather in Rome?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"}]
    for seed in range(10):
        data = await ok(service, {"model": "sim-llama", "messages": msgs, "tools": [WEATHER],
                                  "seed": seed})
        assert data["choices"][0]["message"]["tool_calls"] == []
        assert data["choices"][0]["message"]["content"]


async def test_tool_call_stream_rebuilds_the_call(service: EngineService) -> None:
    body = chat_body("Weather?", tools=[WEATHER], tool_choice="required", seed=4)
    whole = await ok(service, body)
    chunks = await stream(service, body)
    deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks
              if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    call = whole["choices"][0]["message"]["tool_calls"][0]
    assert deltas[0]["id"] == call["id"] and deltas[0]["function"]["name"] == "get_weather"
    args = "".join(d["function"].get("arguments", "") for d in deltas)
    assert args == call["function"]["arguments"]
    assert finish(chunks, 0) == "tool_calls"
    assert chunks[-1]["usage"] == whole["usage"]


# --- reasoning -------------------------------------------------------------------------

async def test_reasoning_model_emits_reasoning_tokens(
    reasoner: EngineService, tokenizer: Tokenizer
) -> None:
    body = {"model": "sim-deepseek-r1", "messages": [{"role": "user", "content": "Why?"}]}
    data = await ok(reasoner, body)
    msg = data["choices"][0]["message"]
    u = data["usage"]
    r = u["completion_tokens_details"]["reasoning_tokens"]
    assert r > 0 and tokenizer.count(msg["reasoning_content"]) == r
    assert u["completion_tokens"] == r + tokenizer.count(msg["content"])
    chunks = await stream(reasoner, body)
    assert joined(chunks, 0, "reasoning_content") == msg["reasoning_content"]
    assert joined(chunks, 0) == msg["content"]
    # structured output after the reasoning; tools at the configured rate (1.0 here)
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}
    data = await ok(reasoner, {**body, "response_format": fmt})
    jsonschema.validate(orjson.loads(data["choices"][0]["message"]["content"]), PERSON)
    assert data["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    data = await ok(reasoner, {**body, "tools": [WEATHER]})
    assert data["choices"][0]["finish_reason"] == "tool_calls"


# --- validation ------------------------------------------------------------------------

BAD = [
    ({"n": 0}, "n"),
    ({"n": 129}, "n"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"top_logprobs": 3}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"seed": "x"}, "seed"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "thing"}}}}, "response_format.json_schema.schema.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"properties": {"a": {"$ref": "#/$defs/Missing"}}}}}},
     "response_format.json_schema.schema.properties.a.$ref"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "array", "minItems": 3, "maxItems": 1}}}},
     "response_format.json_schema.schema.minItems"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice.function.name"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "required": "a"}}}]}, "tools[0].function.parameters.required"),
]


@pytest.mark.parametrize(("extra", "param"), BAD, ids=[p for _, p in BAD])
async def test_bad_values_are_400(service: EngineService, extra: dict[str, Any],
                                  param: str) -> None:
    resp = await post(service, CHAT, chat_body(**extra))
    assert resp.status == 400 and resp.body is not None
    err = orjson.loads(resp.body)["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param
    assert set(err) == {"message", "type", "param", "code"}
