"""Fuzzing Anthropic's Messages routes of a running gateway: a valid Messages body with
one field (at the top, in a message, in a content block, in a tool) replaced by any
JSON value, or with a block of another type; with ``x-api-key`` and with a Bearer
token. No answer is a 5xx; every error is in Anthropic's envelope
(``{"type": "error", "error": {"type", "message"}}``) with a ``request-id``; a body of
the other API is told which API it looks like; the gateway still serves afterwards."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.check import messages_error_ok
from tests.fuzz.conftest import MODEL, Fuzzed
from tests.fuzz.profiles import fuzz_settings

BASE: dict[str, Any] = {
    "model": MODEL, "max_tokens": 4, "system": [{"type": "text", "text": "be brief"}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": "x"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"},
            {"type": "text", "text": "and?"}]},
    ],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
}
# places a value can go: top-level fields, a message's, a block's, a tool's
PLACES: list[tuple[Any, ...]] = [
    ("model",), ("max_tokens",), ("system",), ("messages",), ("tools",), ("tool_choice",),
    ("thinking",), ("stop_sequences",), ("temperature",), ("top_k",), ("metadata",),
    ("stream",), ("messages", 0), ("messages", 0, "role"), ("messages", 0, "content"),
    ("messages", 0, "content", 0), ("messages", 0, "content", 0, "type"),
    ("messages", 0, "content", 0, "text"), ("messages", 1, "content", 0, "input"),
    ("messages", 1, "content", 0, "id"), ("messages", 2, "content", 0, "tool_use_id"),
    ("messages", 2, "content", 0, "content"), ("tools", 0), ("tools", 0, "input_schema"),
    ("tools", 0, "name"), ("system", 0, "cache_control"), ("unknown_field",),
]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "text", "role", "content", "name", "id", "input",
                         "budget_tokens", "source", "cache_control", "x"]), inner,
        max_size=3),
    max_leaves=8)
BLOCK_TYPES = st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking",
                               "redacted_thinking", "document", "search_result", "bogus", ""])


def put(body: dict[str, Any], place: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node: Any = out
    for step in place[:-1]:
        node = node[step]
    node[place[-1]] = value
    return out


def headers(fuzzed: Fuzzed, bearer: bool) -> dict[str, str]:
    key = fuzzed.keys["tenant"]
    return {"authorization": f"Bearer {key}"} if bearer else {"x-api-key": key}


def test_the_base_body_is_served(fuzzed: Fuzzed) -> None:
    for bearer in (False, True):
        resp = fuzzed.client.post("/v1/messages", json=BASE, headers=headers(fuzzed, bearer))
        assert resp.status_code == 200, resp.text
        assert resp.json()["type"] == "message"


def test_any_value_anywhere_is_a_4xx_at_worst(fuzzed: Fuzzed) -> None:
    @fuzz_settings(2.0)
    @given(place=st.sampled_from(PLACES), value=JSON, bearer=st.booleans(),
           path=st.sampled_from(["/v1/messages", "/v1/messages/count_tokens"]))
    def run(place: tuple[Any, ...], value: Any, bearer: bool, path: str) -> None:
        body = put(BASE, place, value)
        if path.endswith("count_tokens"):
            body.pop("max_tokens", None)
        resp = fuzzed.client.post(path, json=body, headers=headers(fuzzed, bearer))
        messages_error_ok(resp, (path, body))

    run()
    fuzzed.still_serves()


def test_blocks_of_any_type(fuzzed: Fuzzed) -> None:
    @fuzz_settings()
    @given(kind=BLOCK_TYPES, extra=st.dictionaries(st.text(max_size=8), JSON, max_size=3),
           role=st.sampled_from(["user", "assistant"]), stream=st.booleans())
    def run(kind: str, extra: dict[str, Any], role: str, stream: bool) -> None:
        block = {**extra, "type": kind}
        body = {"model": MODEL, "max_tokens": 3, "stream": stream,
                "messages": [{"role": "user", "content": "hi"},
                             {"role": role, "content": [block]}] if role == "assistant"
                else [{"role": "user", "content": [block]}]}
        resp = fuzzed.client.post("/v1/messages", json=body, headers=headers(fuzzed, False))
        messages_error_ok(resp, body)

    run()
    fuzzed.still_serves()


def test_the_other_api_is_named(fuzzed: Fuzzed) -> None:
    chat_body = {"model": MODEL,
                 "messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]}
    resp = fuzzed.client.post("/v1/messages", json=chat_body, headers=headers(fuzzed, False))
    err = messages_error_ok(resp, chat_body)
    assert resp.status_code == 400 and err is not None
    assert "/v1/chat/completions" in err["message"]
    resp = fuzzed.client.post("/v1/chat/completions", json=BASE, headers=fuzzed.auth("tenant"))
    assert resp.status_code == 400, resp.text
    body = resp.json()["error"]
    assert body["code"] == "wrong_api" and "/v1/messages" in body["message"]


def test_bad_input_names_the_field(fuzzed: Fuzzed) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({k: v for k, v in BASE.items() if k != "max_tokens"}, "max_tokens"),
        (put(BASE, ("messages", 2, "content", 0, "tool_use_id"), "toolu_nope"), "tool_use_id"),
        (put(BASE, ("messages", 0, "content", 0, "type"), "bogus"), "type"),
        ({**BASE, "max_tokens": 2000, "thinking": {"type": "enabled", "budget_tokens": 4096}},
         "budget_tokens"),
    ]
    for body, field in cases:
        resp = fuzzed.client.post("/v1/messages", json=body, headers=headers(fuzzed, False))
        err = messages_error_ok(resp, body)
        assert resp.status_code == 400 and err is not None, resp.text
        assert field in err["message"], (field, err)
    json_type = {**headers(fuzzed, False), "content-type": "application/json"}
    resp = fuzzed.client.post("/v1/messages", content=b"{not json", headers=json_type)
    assert resp.status_code == 400 and messages_error_ok(resp, "bad json") is not None
    resp = fuzzed.client.post("/v1/messages", json=BASE, headers={"x-api-key": "tp-wrong"})
    err = messages_error_ok(resp, "bad key")
    assert resp.status_code == 401 and err is not None and err["type"] == "authentication_error"
    resp = fuzzed.client.post("/v1/messages/nope", json=BASE, headers=headers(fuzzed, False))
    err = messages_error_ok(resp, "unknown route")
    assert resp.status_code == 404 and err is not None and err["type"] == "not_found_error"
