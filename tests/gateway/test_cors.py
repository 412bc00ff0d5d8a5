"""``server.cors``: preflights answered on every route (the front's inference routes,
the relayed aiohttp routes, and the aiohttp application served directly), only for
allowed origins; actual answers (whole, streamed, errors) carry the origin; off by
default, where nothing changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import ValidationError

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.config.schema import CorsConfig

MODEL = "sim-llama3-8b"
ALLOWED = "https://app.example.com"
OTHER = "https://evil.example.net"
CHAT = {"model": MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
# front: the inference routes; relayed: everything else (aiohttp behind the front)
FRONT_PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/messages"]
RELAYED_PATHS = ["/v1/models", "/health", "/admin/v1/tenants", "/no/such/route"]


def _config(**cors: Any) -> dict[str, Any]:
    cfg = sim_config(replicas=1)
    cfg["server"] = {"cors": {"allow_origins": [ALLOWED], **cors}}
    return cfg


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    g = GatewayThread(_config(), Path(tmp_path_factory.mktemp("cors"))).start()
    assert g.server is not None
    g.inner_port = g.call(g.server.listen_inner())  # the aiohttp app served directly
    yield g
    g.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayThread) -> str:
    return gw.create_key("acme", app="web")


def _urls(gw: GatewayThread, path: str) -> list[str]:
    """The path on the front and on the aiohttp application itself."""
    return [f"http://127.0.0.1:{gw.port}{path}", f"http://127.0.0.1:{gw.inner_port}{path}"]


def _preflight(url: str, origin: str, method: str = "POST",
               headers: str = "authorization, content-type") -> httpx.Response:
    return httpx.options(url, timeout=30, headers={
        "origin": origin, "access-control-request-method": method,
        "access-control-request-headers": headers})


def _no_allow_headers(resp: httpx.Response) -> None:
    assert not [h for h in resp.headers if h.lower().startswith("access-control-allow")]


@pytest.mark.parametrize("path", FRONT_PATHS + RELAYED_PATHS)
def test_preflight_from_an_allowed_origin(gw: GatewayThread, path: str) -> None:
    for url in _urls(gw, path):
        resp = _preflight(url, ALLOWED)
        assert resp.status_code == 204, (url, resp.text)
        h = resp.headers
        assert h["access-control-allow-origin"] == ALLOWED
        assert "POST" in h["access-control-allow-methods"]
        assert h["access-control-allow-headers"] == "authorization, content-type"
        assert h["access-control-max-age"] == "600"
        assert "access-control-allow-credentials" not in h
        assert "origin" in h["vary"].lower()


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models", "/no/such/route"])
def test_preflight_denied(gw: GatewayThread, path: str) -> None:
    for url in _urls(gw, path):
        resp = _preflight(url, OTHER)
        assert resp.status_code == 403, (url, resp.text)
        _no_allow_headers(resp)
        err = resp.json()["error"]
        assert err["code"] == "cors_not_allowed" and OTHER in err["message"]
        # an allowed origin asking for a method not on the list
        resp = _preflight(url, ALLOWED, method="TRACE")
        assert resp.status_code == 403 and "TRACE" in resp.json()["error"]["message"]
        _no_allow_headers(resp)


def test_actual_answers_carry_the_origin(gw: GatewayThread, key: str) -> None:
    auth = {"authorization": f"Bearer {key}"}
    for base in _urls(gw, ""):
        resp = httpx.post(base + "/v1/chat/completions", json=CHAT, timeout=30,
                          headers={**auth, "origin": ALLOWED})
        assert resp.status_code == 200
        assert resp.headers["access-control-allow-origin"] == ALLOWED
        assert resp.headers["vary"] == "Origin"
        assert "x-request-id" in resp.headers["access-control-expose-headers"]
        models = httpx.get(base + "/v1/models", timeout=30, headers={**auth, "origin": ALLOWED})
        assert models.status_code == 200
        assert models.headers["access-control-allow-origin"] == ALLOWED
        # another origin: no CORS permission, but the answer varies by origin
        for path, call in (("/v1/chat/completions", "post"), ("/v1/models", "get")):
            other = httpx.request(call, base + path, timeout=30,
                                  json=CHAT if call == "post" else None,
                                  headers={**auth, "origin": OTHER})
            assert other.status_code == 200
            assert "access-control-allow-origin" not in other.headers
            assert other.headers["vary"] == "Origin"
        # no Origin at all (not a browser): nothing added
        plain = httpx.post(base + "/v1/chat/completions", json=CHAT, timeout=30, headers=auth)
        assert "access-control-allow-origin" not in plain.headers
        assert "vary" not in plain.headers


def test_streams_carry_the_origin(gw: GatewayThread, key: str) -> None:
    for base in _urls(gw, "/v1"):
        client = openai.OpenAI(base_url=base, api_key=key, max_retries=0,
                               default_headers={"origin": ALLOWED})
        with client.chat.completions.with_streaming_response.create(
                model=MODEL, messages=CHAT["messages"], max_tokens=3, stream=True) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            assert resp.headers["access-control-allow-origin"] == ALLOWED
            assert resp.headers["vary"] == "Origin"
            assert len(list(resp.parse())) >= 3
        client.close()


def test_error_answers_carry_the_origin(gw: GatewayThread, key: str) -> None:
    origin = {"origin": ALLOWED}
    for base in _urls(gw, ""):
        cases = [
            httpx.post(base + "/v1/chat/completions", json=CHAT, headers=origin,
                       timeout=30),  # no key: 401
            httpx.post(base + "/v1/chat/completions", json={**CHAT, "max_tokens": 0},
                       headers={**origin, "authorization": f"Bearer {key}"},
                       timeout=30),  # 400
            httpx.get(base + "/v1/chat/completions", headers=origin, timeout=30),  # 405
            httpx.get(base + "/v1/models", headers=origin, timeout=30),  # relayed 401
            httpx.get(base + "/no/such/route", headers=origin, timeout=30),  # relayed 404
        ]
        assert [r.status_code for r in cases] == [401, 400, 405, 401, 404]
        for r in cases:
            assert r.headers["access-control-allow-origin"] == ALLOWED, r.request.url
            assert r.json()["error"]["message"]


def test_the_front_refusal_of_a_malformed_request_carries_the_origin(
        gw: GatewayThread) -> None:
    resp = httpx.post(f"http://127.0.0.1:{gw.port}/v1/chat/completions",
                      content=b"x" * (5 * 1024 * 1024), timeout=30,
                      headers={"origin": ALLOWED, "content-type": "application/json"})
    assert resp.status_code == 413
    assert resp.headers["access-control-allow-origin"] == ALLOWED


def test_listed_headers_and_credentials(tmp_path: Path) -> None:
    gw = GatewayThread(_config(allow_headers=["Authorization", "content-type"],
                               allow_methods=["POST"], allow_credentials=True, max_age_s=60),
                       tmp_path).start()
    try:
        url = f"http://127.0.0.1:{gw.port}/v1/chat/completions"
        ok = _preflight(url, ALLOWED, headers="content-type,Authorization")
        assert ok.status_code == 204
        assert ok.headers["access-control-allow-headers"] == "content-type, authorization"
        assert ok.headers["access-control-allow-methods"] == "POST"
        assert ok.headers["access-control-allow-credentials"] == "true"
        assert ok.headers["access-control-max-age"] == "60"
        bad = _preflight(url, ALLOWED, headers="authorization, x-stainless-os")
        assert bad.status_code == 403 and "x-stainless-os" in bad.json()["error"]["message"]
        _no_allow_headers(bad)
        assert _preflight(url, ALLOWED, method="GET").status_code == 403
        # an allowed origin matches whatever its case
        assert _preflight(url, ALLOWED.upper()).status_code == 204
        actual = httpx.post(url, json=CHAT, headers={"origin": ALLOWED}, timeout=30)
        assert actual.status_code == 401
        assert actual.headers["access-control-allow-credentials"] == "true"
    finally:
        gw.stop()


def test_any_origin(tmp_path: Path) -> None:
    cfg = sim_config(replicas=1)
    cfg["server"] = {"cors": {"allow_origins": ["*"]}}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        for path in ("/v1/chat/completions", "/v1/models"):
            resp = _preflight(f"http://127.0.0.1:{gw.port}{path}", OTHER)
            assert resp.status_code == 204
            assert resp.headers["access-control-allow-origin"] == OTHER
    finally:
        gw.stop()


def test_off_by_default(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1), tmp_path).start()
    try:
        assert gw.config.server.cors is None
        base = f"http://127.0.0.1:{gw.port}"
        pre = _preflight(base + "/v1/chat/completions", ALLOWED)
        assert pre.status_code == 405
        _no_allow_headers(pre)
        for resp in (httpx.post(base + "/v1/chat/completions", json=CHAT, timeout=30,
                                headers={"origin": ALLOWED}),
                     httpx.get(base + "/health", headers={"origin": ALLOWED}, timeout=30)):
            assert "access-control-allow-origin" not in resp.headers
            assert "vary" not in resp.headers
    finally:
        gw.stop()


@pytest.mark.parametrize(("cors", "says"), [
    ({"allow_origins": []}, "at least 1"),
    ({"allow_origins": ["app.example.com"]}, "not an origin"),
    ({"allow_origins": ["https://app.example.com/"]}, "not an origin"),
    ({"allow_origins": ["ftp://x"]}, "not an origin"),
    ({"allow_origins": ["*"], "allow_credentials": True}, "origins listed"),
    ({"allow_origins": [ALLOWED], "allow_methods": ["PO ST"]}, "not an HTTP method"),
    ({"allow_origins": [ALLOWED], "allow_headers": ["a:b"]}, "not a header name"),
    ({"allow_origins": [ALLOWED], "max_age_s": -1}, "greater than or equal"),
])
def test_config_refuses(cors: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        CorsConfig(**cors)
