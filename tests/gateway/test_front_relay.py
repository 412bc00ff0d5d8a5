"""Routes the front does not serve itself reach the aiohttp application through its
relay: status, headers and body come back as the application sent them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tests.gateway.raw_http import Client, chunked, request

MODEL = "sim-llama3-8b"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    g = GatewayThread(sim_config(), Path(tmp_path_factory.mktemp("relay"))).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayThread) -> str:
    return gw.create_key("default", app="relay")


@pytest.fixture(scope="module")
def admin(gw: GatewayThread) -> str:
    return gw.create_key("default", admin=True)


def relayed(resp: httpx.Response) -> bool:
    """aiohttp names itself in ``server``; the front sends no such header."""
    return "aiohttp" in resp.headers.get("server", "")


def test_models(gw: GatewayThread, key: str) -> None:
    resp = httpx.get(gw.base_url + "/models", headers={"Authorization": f"Bearer {key}"})
    assert resp.status_code == 200 and relayed(resp)
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.headers["x-request-id"].startswith("req_")
    assert [m["id"] for m in resp.json()["data"]] == [MODEL]
    resp = httpx.get(gw.base_url + "/models")
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_api_key"


def test_metrics_and_health(gw: GatewayThread, admin: str) -> None:
    httpx.post(gw.base_url + "/chat/completions", headers={"authorization": "Bearer nope"},
               json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
    resp = httpx.get(f"http://127.0.0.1:{gw.port}/metrics",
                     headers={"authorization": f"Bearer {admin}"})
    assert resp.status_code == 200 and relayed(resp)
    assert resp.headers["content-type"].startswith("text/plain")
    unauth = [ln for ln in resp.text.splitlines() if ln.startswith("tokenplane_unauthenticated")]
    assert unauth and float(unauth[0].rsplit(" ", 1)[1]) >= 1  # counted by the front
    resp = httpx.get(f"http://127.0.0.1:{gw.port}/health")
    assert resp.json() == {"status": "ok"}


def test_head_is_answered_without_a_body(gw: GatewayThread) -> None:
    with Client(gw.port) as c:
        c.send(request("HEAD", "/health") + request("GET", "/health"))
        c.sock.settimeout(5)
        data = b""
        while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b'{"status":"ok"}'):
            data += c.sock.recv(65536)
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200")
    assert b"content-length: 15" in head.lower()
    assert rest.startswith(b"HTTP/1.1 200")  # no body between the two heads


def test_admin_routes_with_bodies(gw: GatewayThread, admin: str, key: str) -> None:
    h = {"authorization": f"Bearer {admin}"}
    resp = httpx.post(f"http://127.0.0.1:{gw.port}/admin/v1/tenants", headers=h,
                      json={"name": "relayco"})
    assert resp.status_code == 201 and resp.json() == {"name": "relayco"}
    resp = httpx.get(f"http://127.0.0.1:{gw.port}/admin/v1/tenants", headers=h)
    assert resp.status_code == 200 and "relayco" in resp.text
    resp = httpx.get(f"http://127.0.0.1:{gw.port}/admin/v1/tenants",
                     headers={"authorization": f"Bearer {key}"})
    assert resp.status_code == 403 and resp.json()["error"]["type"] == "permission_error"
    with Client(gw.port) as c:  # a chunked request body, relayed whole
        c.send(request("POST", "/admin/v1/tenants", headers={**h, "transfer-encoding":
                                                             "chunked"})
               + chunked(b'{"name": ', b'"chunkco"}'))
        ans = c.answer()
        assert ans.status == 201 and ans.json() == {"name": "chunkco"}


def test_unknown_path_404_envelope(gw: GatewayThread) -> None:
    for path in ("/v1/nothing", "/nothing", "/v1/chat/completions/", "/admin/v1/nope?x=1"):
        resp = httpx.get(f"http://127.0.0.1:{gw.port}{path}")
        assert resp.status_code == 404 and relayed(resp), path
        assert resp.headers["x-request-id"].startswith("req_")
        err = resp.json()["error"]
        assert err["code"] == "unknown_route" and path.partition("?")[0] in err["message"]


def test_root_and_favicon_answer(gw: GatewayThread) -> None:
    """``/`` says what the server is (agents probe it with HEAD); ``/favicon.ico`` is an
    empty 204, not a 404 in every browser's console."""
    root = httpx.get(f"http://127.0.0.1:{gw.port}/")
    assert root.status_code == 200 and root.json()["service"] == "tokenplane"
    head = httpx.head(f"http://127.0.0.1:{gw.port}/")
    assert head.status_code == 200 and head.content == b""
    assert httpx.get(f"http://127.0.0.1:{gw.port}/favicon.ico").status_code == 204


def test_relayed_stream_is_streamed(gw: GatewayThread, key: str) -> None:
    """A percent-encoded inference path is not the front's (it matches raw paths); aiohttp
    decodes it and streams the answer, and the relay passes the pieces on chunked."""
    body = orjson.dumps({"model": MODEL, "stream": True, "max_tokens": 40,
                         "messages": [{"role": "user", "content": "hi"}]})
    with Client(gw.port) as c:
        c.send(request("POST", "/v1/chat/c%6Fmpletions", body,
                       headers={"authorization": f"Bearer {key}"}))
        ans = c.answer()
        assert ans.status == 200 and "aiohttp" in ans.headers["server"]
        assert ans.headers["transfer-encoding"] == "chunked"
        assert ans.headers["content-type"] == "text/event-stream"
        assert ans.body.endswith(b"data: [DONE]\n\n")
        c.send(request("GET", "/health"))  # the connection stays usable
        assert c.answer().json() == {"status": "ok"}


def test_relay_reaches_a_dead_app_as_502(gw: GatewayThread) -> None:
    assert gw.server is not None and gw.server.front is not None
    relay = gw.server.front.relay
    good = relay.pool

    async def swap(port: int) -> None:
        from tokenplane.upstream.http1_client import H1Pool

        relay.pool = H1Pool(f"http://127.0.0.1:{port}") if port else good

    from tests.gateway.harness import free_port

    gw.call(swap(free_port()))
    try:
        resp = httpx.get(f"http://127.0.0.1:{gw.port}/health")
        assert resp.status_code == 502 and resp.json()["error"]["code"] == "relay_failed"
        assert resp.headers["x-request-id"].startswith("req_")
    finally:
        gw.call(swap(0))
    assert httpx.get(f"http://127.0.0.1:{gw.port}/health").status_code == 200


def test_relay_client_leaves_mid_answer(gw: GatewayThread, key: str) -> None:
    body = orjson.dumps({"model": MODEL, "stream": True, "max_tokens": 2000,
                         "messages": [{"role": "user", "content": "hi"}]})
    for _ in range(3):
        with Client(gw.port) as c:
            c.send(request("POST", "/v1/chat/c%6Fmpletions", body,
                           headers={"authorization": f"Bearer {key}"}))
            c.first_piece()
    # the relay's abandoned answers leave the gateway serving
    assert httpx.get(f"http://127.0.0.1:{gw.port}/health").status_code == 200
