"""Every bad input gets its status and a helpful message in OpenAI's envelope."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.gateway.harness import GatewayThread

MODEL = "sim-llama3-8b"
OK_MSG = [{"role": "user", "content": "hi"}]


def _post(gw: GatewayThread, key: str | None, body: bytes | dict[str, Any],
          path: str = "/chat/completions") -> httpx.Response:
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    if isinstance(body, dict):
        return httpx.post(gw.base_url + path, json=body, headers=headers, timeout=30)
    return httpx.post(gw.base_url + path, content=body, headers=headers, timeout=30)


def _check(resp: httpx.Response, status: int, *needles: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers.get("x-request-id", "").startswith("req_")
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    for n in needles:
        assert n in err["message"], err
    assert "Traceback" not in resp.text
    return dict(err)


CASES: list[tuple[str, Any, int, tuple[str, ...], str | None]] = [
    ("invalid json", b"{nope", 400, ("not valid JSON",), None),
    ("invalid utf-8", b'{"model": "\xff\xfe"}', 400, ("UTF-8",), None),
    ("not an object", b"[1, 2]", 400, ("JSON object",), None),
    ("empty body", b"", 400, ("empty",), None),
    ("missing model", {"messages": OK_MSG}, 400, ("model",), "model"),
    ("model not a string", {"model": 5, "messages": OK_MSG}, 400, ("must be a string",), "model"),
    ("unknown alias", {"model": "gpt-17", "messages": OK_MSG}, 404, ("gpt-17",), "model"),
    ("missing messages", {"model": MODEL}, 400, ("messages",), "messages"),
    ("messages not a list", {"model": MODEL, "messages": "hi"}, 400, ("array",), "messages"),
    ("message not an object", {"model": MODEL, "messages": ["hi"]}, 400, ("object",),
     "messages[0]"),
    ("unknown role", {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, 400,
     ("role", "wizard"), "messages[0].role"),
    ("negative max_tokens", {"model": MODEL, "messages": OK_MSG, "max_tokens": -5}, 400,
     ("at least 1",), "max_tokens"),
    ("max_tokens mistyped", {"model": MODEL, "messages": OK_MSG, "max_tokens": "ten"}, 400,
     ("integer",), "max_tokens"),
    ("max_tokens beyond window", {"model": MODEL, "messages": OK_MSG, "max_tokens": 100000},
     400, ("context window",), "max_tokens"),
    ("prompt plus max_tokens beyond window",
     {"model": MODEL, "messages": [{"role": "user", "content": "word " * 3000}],
      "max_tokens": 2000}, 400, ("maximum context length",), "messages"),
    ("temperature out of range", {"model": MODEL, "messages": OK_MSG, "temperature": 7}, 400,
     ("temperature",), "temperature"),
    ("stream mistyped", {"model": MODEL, "messages": OK_MSG, "stream": "yes"}, 400,
     ("boolean",), "stream"),
]


@pytest.mark.parametrize(("name", "body", "status", "needles", "param"), CASES,
                         ids=[c[0] for c in CASES])
def test_bad_bodies(gateway: GatewayThread, api_key: str, name: str, body: Any, status: int,
                    needles: tuple[str, ...], param: str | None) -> None:
    err = _check(_post(gateway, api_key, body), status, *needles)
    assert err["type"] == "invalid_request_error"
    if param is not None:
        assert err["param"] == param


def test_completion_prompt_required(gateway: GatewayThread, api_key: str) -> None:
    _check(_post(gateway, api_key, {"model": MODEL}, "/completions"), 400, "prompt")


def test_missing_key_401(gateway: GatewayThread) -> None:
    err = _check(_post(gateway, None, {"model": MODEL, "messages": OK_MSG}), 401, "API key")
    assert err["code"] == "missing_api_key"


def test_unknown_route_404(gateway: GatewayThread, api_key: str) -> None:
    resp = httpx.get(gateway.base_url + "/nothing/here", timeout=10)
    _check(resp, 404, "/v1/nothing/here")


def test_wrong_method_405(gateway: GatewayThread) -> None:
    resp = httpx.get(gateway.base_url + "/chat/completions", timeout=10)
    _check(resp, 405, "GET")


def test_ten_megabyte_body_413(gateway: GatewayThread, api_key: str) -> None:
    big = b'{"model": "x", "messages": [{"role": "user", "content": "' + b"a" * (10 << 20) + b'"}]}'
    _check(_post(gateway, api_key, big), 413, "too large")


def test_bad_inputs_are_metered_not_lost(gateway: GatewayThread, api_key: str) -> None:
    before = gateway.gateway.meter.stats().journaled
    _post(gateway, api_key, {"model": MODEL, "messages": "nope"})
    assert gateway.gateway.meter.stats().journaled == before + 1
