"""The simulated engine behaves like a model for the official openai client, through a
real gateway (in-process engines and real HTTP to ``tokenplane sim``): stop, n, seed,
logprobs, structured output, tools (an agent loop), reasoning models; the ledger equals
the engine's usage; bad values are 400s in OpenAI's envelope at the gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from tests.gateway.harness import GatewayThread
from tests.gateway.sim_process import start_sim, stop_sim

MODEL = "sim-llama3-8b"
REASONER = "sim-deepseek-r1"
WEATHER_PARAMS = {"type": "object", "properties": {
    "city": {"type": "string", "minLength": 1},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}
TOOLS: Any = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": WEATHER_PARAMS}}]
ORDER = {"type": "object", "properties": {
    "id": {"type": "string", "format": "uuid"},
    "items": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"$ref": "#/$defs/Line"}},
    "placed": {"type": "string", "format": "date-time"},
    "status": {"enum": ["new", "paid", "shipped"]}},
    "required": ["id", "items", "placed", "status"], "additionalProperties": False,
    "$defs": {"Line": {"type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1, "maximum": 9},
        "price": {"type": "number", "minimum": 0, "maximum": 500}},
        "required": ["sku", "qty", "price"], "additionalProperties": False}}}
MSGS: Any = [{"role": "user", "content": "What is the weather in Lisbon?"}]


def _model(alias: str, backends: list[dict[str, Any]]) -> dict[str, Any]:
    return {"alias": alias, "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 8192, "backends": backends,
            "prices": {"input": "0.10", "cached_input": "0.05", "output": "0.40"}}


def in_process_config() -> dict[str, Any]:
    return {"models": [
        _model(MODEL, [{"id": "sim", "type": "sim", "profile": "instant"}]),
        _model(REASONER, [{"id": "r1", "type": "sim", "profile": "instant",
                           "sim": {"tool_call_rate": 1.0}}]),
    ], "observe": {"metrics": {"listen": None}}}


def http_config(ports: dict[str, int]) -> dict[str, Any]:
    return {"models": [
        _model(alias, [{"id": f"remote-{i}", "type": "vllm",
                        "base_url": f"http://127.0.0.1:{port}", "model": alias}])
        for i, (alias, port) in enumerate(ports.items())
    ], "observe": {"metrics": {"listen": None}}}


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, int]]:
    """``tokenplane sim`` processes (real HTTP), one per model name."""
    plain, plain_ports = start_sim(port=0, model=MODEL)
    try:
        r1, r1_ports = start_sim(port=0, model=REASONER)
        try:
            yield {MODEL: plain_ports[0], REASONER: r1_ports[0]}
        finally:
            stop_sim(r1)
    finally:
        stop_sim(plain)


@pytest.fixture(params=["in_process", "http"])
def gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GatewayThread]:
    if request.param == "in_process":
        cfg = in_process_config()
    else:
        cfg = http_config(request.getfixturevalue("sims"))
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        yield gw
    finally:
        if gw.server is not None:
            gw.stop()


def client_of(gw: GatewayThread) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("default", app="behave"),
                         max_retries=0)


def get_weather(city: str, unit: str) -> str:
    return json.dumps({"city": city, "temperature": 21, "unit": unit})


def test_each_behaviour_and_the_ledger(gateway: GatewayThread) -> None:
    client = client_of(gateway)
    seen: dict[str, Any] = {}

    # stop: the text ends before the stop sequence, in a stream too
    r = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=MSGS, stop=["\n\n"], seed=11)
    stopped = r.parse()
    seen[r.headers["x-request-id"]] = stopped.usage
    assert stopped.choices[0].finish_reason == "stop"
    text = stopped.choices[0].message.content or ""
    assert text and "\n\n" not in text
    parts = []
    finishes = []
    for chunk in client.chat.completions.create(model=MODEL, messages=MSGS, stop=["\n\n"],
                                                seed=11, stream=True):
        for ch in chunk.choices:
            parts.append(ch.delta.content or "")
            finishes += [ch.finish_reason] if ch.finish_reason else []
    assert "".join(parts) == text and finishes == ["stop"]

    # n: n choices, the prompt counted once, the completions summed
    r = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=MSGS, n=4, max_tokens=9, seed=5)
    many = r.parse()
    seen[r.headers["x-request-id"]] = many.usage
    assert sorted(c.index for c in many.choices) == [0, 1, 2, 3]
    assert many.usage is not None and stopped.usage is not None
    assert many.usage.completion_tokens == 36
    assert many.usage.prompt_tokens == stopped.usage.prompt_tokens
    indexes = set()
    usage = None
    for chunk in client.chat.completions.create(
            model=MODEL, messages=MSGS, n=3, max_tokens=5, stream=True,
            stream_options={"include_usage": True}):
        indexes |= {c.index for c in chunk.choices}
        usage = chunk.usage or usage
    assert indexes == {0, 1, 2} and usage is not None and usage.completion_tokens == 15

    # seed: the same seed gives the same text; another seed another
    def text_of(seed: int) -> str | None:
        return client.chat.completions.create(model=MODEL, messages=MSGS, seed=seed,
                                              temperature=0.8).choices[0].message.content

    assert text_of(42) == text_of(42) != text_of(43)

    # logprobs: OpenAI's shape, typed by the SDK
    lp = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=8,
                                        logprobs=True, top_logprobs=4)
    assert lp.choices[0].logprobs is not None and lp.choices[0].logprobs.content is not None
    content = lp.choices[0].logprobs.content
    assert len(content) == 8
    for e in content:
        assert e.logprob <= 0 and e.bytes == list(e.token.encode())
        tops = [t.logprob for t in e.top_logprobs]
        assert len(tops) == 4 and tops == sorted(tops, reverse=True)
    legacy = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=5,
                                       logprobs=2)
    assert legacy.choices[0].logprobs is not None
    assert len(legacy.choices[0].logprobs.tokens or []) == 5

    # response_format: json_object and json_schema
    obj = client.chat.completions.create(model=MODEL, messages=MSGS,
                                         response_format={"type": "json_object"})
    assert isinstance(json.loads(obj.choices[0].message.content or ""), dict)
    for seed in range(5):
        r = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=MSGS, seed=seed, response_format={
                "type": "json_schema",
                "json_schema": {"name": "order", "schema": ORDER, "strict": True}})
        order = r.parse()
        seen[r.headers["x-request-id"]] = order.usage
        jsonschema.validate(json.loads(order.choices[0].message.content or ""), ORDER)

    # reasoning model (by its name): reasoning_content and reasoning_tokens
    r = client.chat.completions.with_raw_response.create(model=REASONER, messages=MSGS)
    thought = r.parse()
    seen[r.headers["x-request-id"]] = thought.usage
    extra = thought.choices[0].message.model_extra or {}
    assert extra.get("reasoning_content")
    assert thought.usage is not None and thought.usage.completion_tokens_details is not None
    assert (thought.usage.completion_tokens_details.reasoning_tokens or 0) > 0
    reasoning = ""
    for chunk in client.chat.completions.create(model=REASONER, messages=MSGS, stream=True):
        for ch in chunk.choices:
            reasoning += (ch.delta.model_extra or {}).get("reasoning_content") or ""
    assert reasoning == extra["reasoning_content"]

    # the ledger equals the engine's usage, request by request
    gateway.stop()
    rows = {row["request_id"]: row for row in gateway.ledger_rows()}
    for rid, use in seen.items():
        row = rows[rid]
        assert row["usage_source"] == "upstream"
        assert row["input_tokens"] == use.prompt_tokens
        assert row["output_tokens"] == use.completion_tokens
        details = use.completion_tokens_details
        assert row["reasoning_tokens"] == ((details.reasoning_tokens or 0) if details else 0)


def test_tools_loop_ends_with_an_answer(gateway: GatewayThread) -> None:
    """The client runs the tool the model asks for, sends the result back, and gets a
    final answer in text: an agent loop that terminates."""
    client = client_of(gateway)
    messages: list[Any] = list(MSGS)
    steps = 0
    while True:
        steps += 1
        assert steps <= 5
        resp = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS,
                                              tool_choice="required" if steps == 1 else "auto")
        msg = resp.choices[0].message
        if not msg.tool_calls:
            assert resp.choices[0].finish_reason == "stop" and msg.content
            break
        assert resp.choices[0].finish_reason == "tool_calls"
        messages.append(msg.model_dump(exclude_none=True))
        for call in msg.tool_calls:
            assert call.id.startswith("call_") and call.type == "function"
            args = json.loads(call.function.arguments)
            jsonschema.validate(args, WEATHER_PARAMS)
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": get_weather(**args)})
    assert steps == 2

    # streamed tool calls rebuild into the same call
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in client.chat.completions.create(model=MODEL, messages=MSGS, tools=TOOLS,
                                                tool_choice="required", seed=3, stream=True):
        for ch in chunk.choices:
            finish = ch.finish_reason or finish
            for d in ch.delta.tool_calls or ():
                c = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
                c["id"] += d.id or ""
                if d.function is not None:
                    c["name"] += d.function.name or ""
                    c["arguments"] += d.function.arguments or ""
    assert finish == "tool_calls" and calls[0]["name"] == "get_weather"
    jsonschema.validate(json.loads(calls[0]["arguments"]), WEATHER_PARAMS)


BAD: list[tuple[dict[str, Any], str]] = [
    ({"n": 0}, "n"),
    ({"n": 129}, "n"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "text"}}}}}},
     "response_format.json_schema.schema.properties.a.type"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice.function.name"),
]


@pytest.mark.parametrize(("extra", "param"), BAD, ids=[p for _, p in BAD])
def test_bad_values_are_400_at_the_gateway(tmp_path: Path, extra: dict[str, Any],
                                           param: str) -> None:
    gw = GatewayThread(in_process_config(), tmp_path).start()
    try:
        client = client_of(gw)
        with pytest.raises(openai.BadRequestError) as exc:
            client.chat.completions.create(model=MODEL, messages=MSGS, **extra)
        err = exc.value.body
        assert isinstance(err, dict) and err["param"] == param
        assert err["type"] == "invalid_request_error"
    finally:
        gw.stop()


def test_standalone_sim_over_http(sims: dict[str, int]) -> None:
    """The openai client straight to ``tokenplane sim``: the same behaviour."""
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{sims[MODEL]}/v1", api_key="none",
                           max_retries=0)
    resp = client.chat.completions.create(model=MODEL, messages=MSGS, tools=TOOLS,
                                          tool_choice={"type": "function",
                                                       "function": {"name": "get_weather"}})
    call = (resp.choices[0].message.tool_calls or [])[0]
    jsonschema.validate(json.loads(call.function.arguments), WEATHER_PARAMS)
    many = client.chat.completions.create(model=MODEL, messages=MSGS, n=2, stop="\n",
                                          seed=1)
    assert len(many.choices) == 2 and all(c.finish_reason == "stop" for c in many.choices)
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model=MODEL, messages=MSGS, n=200)
    assert isinstance(exc.value.body, dict) and exc.value.body["param"] == "n"


def test_sim_behaviour_flags() -> None:
    """``tokenplane sim --tool-call-rate 1.0 --reasoning``: a plain model name that
    reasons and always calls a tool under ``tool_choice: auto``."""
    proc, ports = start_sim(port=0, model="plain-model",
                            extra=("--tool-call-rate", "1.0", "--reasoning"))
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{ports[0]}/v1", api_key="none",
                               max_retries=0)
        for seed in range(3):
            r = client.chat.completions.create(model="plain-model", messages=MSGS,
                                               tools=TOOLS, seed=seed)
            assert r.choices[0].finish_reason == "tool_calls"
            assert (r.choices[0].message.model_extra or {}).get("reasoning_content")
    finally:
        stop_sim(proc)
