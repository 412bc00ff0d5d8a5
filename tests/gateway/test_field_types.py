"""Every field of the OpenAI bodies the gateway forwards is type- and range-checked
(issue 13, item 14): one wrong-type or out-of-range probe per field, each a 400
``invalid_request_error`` whose ``param`` names the field path; a body that is not
JSON is a 415 on the front and on the aiohttp app alike, inference and admin routes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.harness import GatewayThread, sim_config

MODEL = "sim-llama3-8b"
USER = [{"role": "user", "content": "hi"}]
CHAT = {"model": MODEL, "messages": USER, "max_tokens": 3}
TEXT = {"model": MODEL, "prompt": "hi", "max_tokens": 3}
EMBED = {"model": MODEL, "input": "hi"}
HUGE = 10**30  # the "99999..." of the trial's probes
FN = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


def msgs(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [*USER, *extra]


# (route, base body, the field(s) set, expected param); the field set replaces the base's
PROBES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    # chat completions: OpenAI's fields
    ("chat", CHAT, {"logprobs": "x"}, "logprobs"),
    ("chat", CHAT, {"logprobs": 1}, "logprobs"),
    ("chat", CHAT, {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("chat", CHAT, {"logprobs": True, "top_logprobs": "3"}, "top_logprobs"),
    ("chat", CHAT, {"top_logprobs": 2}, "top_logprobs"),  # only with logprobs: true
    ("chat", CHAT, {"response_format": True}, "response_format"),
    ("chat", CHAT, {"response_format": {"type": "xml"}}, "response_format.type"),
    ("chat", CHAT, {"response_format": {"type": "json_schema"}},
     "response_format.json_schema"),
    ("chat", CHAT, {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": "{}"}}}, "response_format.json_schema.schema"),
    ("chat", CHAT, {"stop": HUGE}, "stop"),
    ("chat", CHAT, {"stop": ["a", 1]}, "stop[1]"),
    ("chat", CHAT, {"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ("chat", CHAT, {"seed": "1"}, "seed"),
    ("chat", CHAT, {"seed": HUGE}, "seed"),
    ("chat", CHAT, {"seed": 1.5}, "seed"),
    ("chat", CHAT, {"n": 0}, "n"),
    ("chat", CHAT, {"n": True}, "n"),
    ("chat", CHAT, {"temperature": "hot"}, "temperature"),
    ("chat", CHAT, {"temperature": -0.1}, "temperature"),
    ("chat", CHAT, {"top_p": 1.5}, "top_p"),
    ("chat", CHAT, {"presence_penalty": 2.5}, "presence_penalty"),
    ("chat", CHAT, {"frequency_penalty": [1]}, "frequency_penalty"),
    ("chat", CHAT, {"logit_bias": [1, 2]}, "logit_bias"),
    ("chat", CHAT, {"logit_bias": {"abc": 1}}, "logit_bias.abc"),
    ("chat", CHAT, {"logit_bias": {"50256": 101}}, "logit_bias.50256"),
    ("chat", CHAT, {"logit_bias": {"50256": "1"}}, "logit_bias.50256"),
    ("chat", CHAT, {"user": 42}, "user"),
    ("chat", CHAT, {"max_tokens": 2.5}, "max_tokens"),
    ("chat", CHAT, {"max_completion_tokens": 0}, "max_completion_tokens"),
    ("chat", CHAT, {"stream": True, "stream_options": "yes"}, "stream_options"),
    ("chat", CHAT, {"stream": True, "stream_options": {"include_usage": "yes"}},
     "stream_options.include_usage"),
    ("chat", CHAT, {"parallel_tool_calls": "no"}, "parallel_tool_calls"),
    ("chat", CHAT, {"tools": {"type": "function"}}, "tools"),
    ("chat", CHAT, {"tools": [{"type": "retrieval"}]}, "tools[0].type"),
    ("chat", CHAT, {"tools": [{"type": "function", "function": {"name": 3}}]},
     "tools[0].function.name"),
    ("chat", CHAT, {"tools": [{"type": "function", "function": {
        "name": "f", "parameters": "{}"}}]}, "tools[0].function.parameters"),
    ("chat", CHAT, {"tools": [FN], "tool_choice": "always"}, "tool_choice"),
    ("chat", CHAT, {"tools": [FN], "tool_choice": 1}, "tool_choice"),
    ("chat", CHAT, {"tools": [FN], "tool_choice": {"type": "function", "function": {}}},
     "tool_choice.function.name"),
    ("chat", CHAT, {"metadata": {"k": 1}}, "metadata.k"),
    ("chat", CHAT, {"store": "true"}, "store"),
    ("chat", CHAT, {"service_tier": "gold"}, "service_tier"),
    ("chat", CHAT, {"reasoning_effort": 3}, "reasoning_effort"),
    ("chat", CHAT, {"modalities": ["text", "smell"]}, "modalities[1]"),
    ("chat", CHAT, {"audio": {"voice": "alloy"}}, "audio.format"),
    ("chat", CHAT, {"prediction": {"type": "content", "content": 5}}, "prediction.content"),
    ("chat", CHAT, {"functions": [{"name": 5}]}, "functions[0].name"),
    ("chat", CHAT, {"function_call": 5}, "function_call"),
    # chat completions: messages
    ("chat", CHAT, {"messages": [{"role": "user"}]}, "messages[0].content"),
    ("chat", CHAT, {"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ("chat", CHAT, {"messages": [{"content": "x"}]}, "messages[0].role"),
    ("chat", CHAT, {"messages": [{"role": "user", "content": "x", "name": 5}]},
     "messages[0].name"),
    ("chat", CHAT, {"messages": msgs({"role": "user", "content": [{"type": "video"}]})},
     "messages[1].content[0].type"),
    ("chat", CHAT, {"messages": msgs({"role": "user", "content": [{"type": "text"}]})},
     "messages[1].content[0].text"),
    ("chat", CHAT, {"messages": msgs({"role": "user", "content": "x"}, {"role": "user",
     "content": [{"type": "image_url", "image_url": "http://x/y.png"}]})},
     "messages[2].content[0].image_url"),
    ("chat", CHAT, {"messages": msgs({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "u", "detail": "max"}}]})},
     "messages[1].content[0].image_url.detail"),
    ("chat", CHAT, {"messages": msgs({"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "x", "format": "ogg"}}]})},
     "messages[1].content[0].input_audio.format"),
    ("chat", CHAT, {"messages": msgs({"role": "assistant", "content": None})},
     "messages[1].content"),
    ("chat", CHAT, {"messages": msgs({"role": "assistant", "content": "x", "refusal": 1})},
     "messages[1].refusal"),
    ("chat", CHAT, {"messages": msgs({"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "id": 7, "function": {"name": "f", "arguments": "{}"}}]})},
     "messages[1].tool_calls[0].id"),
    ("chat", CHAT, {"messages": msgs({"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]})},
     "messages[1].tool_calls[0].function.arguments"),
    ("chat", CHAT, {"messages": msgs({"role": "tool", "content": "r", "tool_call_id": 1})},
     "messages[1].tool_call_id"),
    # chat completions: vLLM / SGLang extras (forwarded, so checked)
    ("chat", CHAT, {"top_k": "40"}, "top_k"),
    ("chat", CHAT, {"min_p": 2}, "min_p"),
    ("chat", CHAT, {"repetition_penalty": -1}, "repetition_penalty"),
    ("chat", CHAT, {"chat_template_kwargs": "x"}, "chat_template_kwargs"),
    ("chat", CHAT, {"stop_token_ids": [1, "2"]}, "stop_token_ids[1]"),
    ("chat", CHAT, {"ignore_eos": 1}, "ignore_eos"),
    # completions
    ("text", TEXT, {"logprobs": True}, "logprobs"),
    ("text", TEXT, {"logprobs": 6}, "logprobs"),
    ("text", TEXT, {"echo": "yes"}, "echo"),
    ("text", TEXT, {"best_of": 0}, "best_of"),
    ("text", TEXT, {"suffix": 1}, "suffix"),
    ("text", TEXT, {"stop": HUGE}, "stop"),
    ("text", TEXT, {"seed": "x"}, "seed"),
    ("text", TEXT, {"n": -1}, "n"),
    ("text", TEXT, {"logit_bias": {"1": -101}}, "logit_bias.1"),
    ("text", TEXT, {"temperature": 2.5}, "temperature"),
    ("text", TEXT, {"prompt": {"text": "hi"}}, "prompt"),
    ("text", TEXT, {"prompt": [1, "a"]}, "prompt[1]"),
    ("text", TEXT, {"user": ["u"]}, "user"),
    # embeddings
    ("embed", EMBED, {"encoding_format": "hex"}, "encoding_format"),
    ("embed", EMBED, {"encoding_format": 1}, "encoding_format"),
    ("embed", EMBED, {"dimensions": 0}, "dimensions"),
    ("embed", EMBED, {"dimensions": "256"}, "dimensions"),
    ("embed", EMBED, {"user": 1}, "user"),
    ("embed", EMBED, {"input": {"a": 1}}, "input"),
    ("embed", EMBED, {"input": ["a", 2]}, "input[1]"),
    ("embed", EMBED, {"input": []}, "input"),
]
PATHS = {"chat": "/chat/completions", "text": "/completions", "embed": "/embeddings"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    g = GatewayThread(sim_config(replicas=1), Path(tmp_path_factory.mktemp("types"))).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def client(gw: GatewayThread) -> Iterator[httpx.Client]:
    key = gw.create_key("default", app="types")
    with httpx.Client(base_url=gw.base_url, timeout=30,
                      headers={"authorization": f"Bearer {key}"}) as c:
        yield c


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["x-request-id"].startswith("req_")
    err: dict[str, Any] = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error"
    return err


@pytest.mark.parametrize(("route", "base", "fields", "param"), PROBES,
                         ids=[f"{p[0]}:{p[3]}:{i}" for i, p in enumerate(PROBES)])
def test_a_wrong_field_is_refused_naming_it(client: httpx.Client, route: str,
                                            base: dict[str, Any], fields: dict[str, Any],
                                            param: str) -> None:
    err = _error(client.post(PATHS[route], json={**base, **fields}), 400)
    assert err["param"] == param, err
    assert err["code"] in ("invalid_type", "invalid_value", "missing_required"), err


def test_the_probes_bases_are_served(client: httpx.Client) -> None:
    """The probes fail for their field, not for their base body."""
    for route, base in (("chat", CHAT), ("text", TEXT), ("embed", EMBED)):
        assert client.post(PATHS[route], json=base).status_code == 200
    full = {**CHAT, "messages": msgs(
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "user", "content": [{"type": "text", "text": "and?"}]}),
        "tools": [FN], "tool_choice": "auto", "stop": ["\n"], "seed": 7, "n": 1,
        "temperature": 0, "top_p": 1, "logit_bias": {"50256": -100}, "user": "u",
        "response_format": {"type": "text"}, "logprobs": False, "top_k": 5, "min_p": 0.1,
        "unknown_extra_field": {"passed": "through"}, "presence_penalty": None}
    resp = client.post(PATHS["chat"], json=full)
    assert resp.status_code == 200, resp.text


NOT_JSON = [("text/plain", b'{"model": "x"}'),
            ("application/x-www-form-urlencoded", b"model=x&prompt=hi"),
            ("multipart/form-data; boundary=x", b"--x--"),
            ("application/json; charset=latin-1", b'{"model": "x"}')]


@pytest.mark.parametrize(("ctype", "body"), NOT_JSON, ids=[c for c, _ in NOT_JSON])
def test_a_body_that_is_not_json_is_415_on_both_servers(gw: GatewayThread, ctype: str,
                                                        body: bytes) -> None:
    assert gw.server is not None
    key = gw.create_key("default", app="ctype")
    admin = gw.create_key("ops", admin=True)
    inner = gw.call(gw.server.listen_inner())  # the aiohttp app served directly
    for port in (gw.port, inner):  # the front, then the aiohttp app
        base = f"http://127.0.0.1:{port}"
        for path, k in [(f"/v1{p}", key) for p in PATHS.values()] + \
                [("/admin/v1/tenants", admin)]:
            resp = httpx.post(base + path, content=body, timeout=30,
                              headers={"authorization": f"Bearer {k}", "content-type": ctype})
            assert resp.status_code == 415, (port, path, resp.text)
            assert resp.headers["x-request-id"].startswith("req_")
            err = resp.json()["error"]
            assert err["code"] == "unsupported_media_type", err
            assert "application/json" in err["message"] or "charset" in err["message"]


@pytest.mark.parametrize("ctype", [None, "application/json", "application/json; charset=utf-8",
                                   "APPLICATION/JSON", "application/vnd.api+json"])
def test_json_or_no_content_type_is_served(gw: GatewayThread, ctype: str | None) -> None:
    key = gw.create_key("default", app="ctype")
    headers = {"authorization": f"Bearer {key}"}
    if ctype is not None:
        headers["content-type"] = ctype
    resp = httpx.post(gw.base_url + "/chat/completions", timeout=30, headers=headers,
                      content=b'{"model": "%s", "messages": [{"role": "user", "content": "x"}],'
                              b' "max_tokens": 2}' % MODEL.encode())
    assert resp.status_code == 200, resp.text


# found by the fuzz suite (tests/fuzz): a content part without text (a file, audio,
# video, a refusal) made the prompt counter raise: a 500
MEDIA_PARTS = [
    ("system", {"type": "file", "file": {}}),
    ("user", {"type": "file", "file": {"file_id": "file-1"}}),
    ("user", {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}),
    ("user", {"type": "video_url", "video_url": {"url": "http://x/v.mp4"}}),
    ("user", {"type": "audio_url", "audio_url": {"url": "http://x/a.wav"}}),
    ("assistant", {"type": "refusal", "refusal": "no"}),
]


@pytest.mark.parametrize(("role", "part"), MEDIA_PARTS, ids=[p["type"] for _, p in MEDIA_PARTS])
def test_parts_without_text_are_served(client: httpx.Client, role: str,
                                       part: dict[str, Any]) -> None:
    body = {**CHAT, "messages": [{"role": role, "content": [part]},
                                 {"role": "user", "content": "hi"}]}
    resp = client.post(PATHS["chat"], json=body)
    assert resp.status_code == 200, resp.text


def test_curls_default_content_type_is_told_how_to_fix_it(gw: GatewayThread) -> None:
    """Issue 31: ``curl -d '{...}'`` sends JSON as a form; the 415 says what curl did
    and the flag that fixes it, on the front and on the aiohttp app."""
    assert gw.server is not None
    key = gw.create_key("default", app="curl")
    inner = gw.call(gw.server.listen_inner())
    body = b'{"model": "%s", "messages": [{"role": "user", "content": "x"}]}' % MODEL.encode()
    for port in (gw.port, inner):
        resp = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", content=body,
                          timeout=30, headers={"authorization": f"Bearer {key}",
                                               "content-type": "application/x-www-form-urlencoded"})
        assert resp.status_code == 415, resp.text
        message = resp.json()["error"]["message"]
        assert "what curl sends with -d" in message
        assert "-H 'Content-Type: application/json'" in message and "--json" in message
