"""The front answers the inference routes as the aiohttp application does: the same
request to the front and to the application behind it (its loopback port) gets the
same status, envelope, headers and body shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.gateway.harness import GatewayThread, sim_config

MODEL = "sim-llama3-8b"
LIMIT = 4096
MSG = [{"role": "user", "content": "hi"}]
# set per hop or per process, not by the routes
_TRANSPORT = {"date", "server", "content-length", "transfer-encoding", "connection",
              "keep-alive"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = {**sim_config(), "server": {"max_body_bytes": LIMIT}}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("parity"))).start()
    assert g.server is not None
    g.inner_port = g.call(g.server.listen_inner())
    yield g
    g.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayThread) -> str:
    return gw.create_key("default", app="parity")


def both(gw: GatewayThread, method: str, path: str, **kw: Any) -> tuple[httpx.Response, ...]:
    assert gw.server is not None
    out = []
    for port in (gw.port, gw.inner_port):
        with httpx.Client(timeout=30) as c:
            out.append(c.request(method, f"http://127.0.0.1:{port}{path}", **kw))
    front, app = out
    assert "aiohttp" in app.headers.get("server", "")
    assert "server" not in front.headers  # answered by the front, not relayed
    return front, app


def same_head(front: httpx.Response, app: httpx.Response) -> None:
    assert front.status_code == app.status_code, (front.text, app.text)
    names = {k for k in front.headers if k not in _TRANSPORT}
    assert names == {k for k in app.headers if k not in _TRANSPORT}
    for name in names - {"x-request-id"}:
        if not name.startswith("x-ratelimit-reset"):
            assert front.headers[name] == app.headers[name], name
    assert front.headers["x-request-id"] != app.headers["x-request-id"]
    assert front.headers["x-request-id"].startswith("req_")


def auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


ERROR_CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("invalid json", "/v1/chat/completions", {"content": b"{nope"}, True),
    ("no key", "/v1/chat/completions", {"json": {"model": MODEL, "messages": MSG}}, False),
    ("unknown model", "/v1/chat/completions", {"json": {"model": "zz", "messages": MSG}}, True),
    ("bad field", "/v1/completions", {"json": {"model": MODEL}}, True),
    ("bad embeddings", "/v1/embeddings", {"json": {"model": MODEL, "input": 3.5}}, True),
    ("too large", "/v1/chat/completions", {"content": b"x" * (LIMIT + 1)}, True),
    ("empty body", "/v1/chat/completions", {"content": b""}, True),
]


@pytest.mark.parametrize("name,path,kw,keyed", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match(gw: GatewayThread, key: str, name: str, path: str, kw: dict[str, Any],
                      keyed: bool) -> None:
    front, app = both(gw, "POST", path, headers=auth(key) if keyed else {}, **kw)
    same_head(front, app)
    assert front.status_code >= 400
    assert front.json() == app.json()


def test_bad_key_matches(gw: GatewayThread) -> None:
    front, app = both(gw, "POST", "/v1/chat/completions", headers=auth("tp-nope"),
                      json={"model": MODEL, "messages": MSG})
    same_head(front, app)
    assert front.status_code == 401 and front.json() == app.json()


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_wrong_method_matches(gw: GatewayThread, method: str) -> None:
    front, app = both(gw, method, "/v1/completions")
    same_head(front, app)
    assert front.status_code == 405 and front.json() == app.json()


def _shape(obj: Any) -> Any:
    """The JSON's structure with ids and timings taken out."""
    if isinstance(obj, dict):
        return {k: _shape(v) for k, v in obj.items() if k not in ("id", "created")}
    if isinstance(obj, list):
        return [_shape(v) for v in obj]
    return type(obj).__name__


@pytest.mark.parametrize("path,body", [
    ("/v1/chat/completions", {"model": MODEL, "messages": MSG, "max_tokens": 7}),
    ("/v1/completions", {"model": MODEL, "prompt": "Once", "max_tokens": 4}),
    ("/v1/embeddings", {"model": MODEL, "input": ["a", "b c"]}),
])
def test_answers_match(gw: GatewayThread, key: str, path: str, body: dict[str, Any]) -> None:
    front, app = both(gw, "POST", path, headers=auth(key), json=body)
    same_head(front, app)
    assert front.status_code == 200
    assert front.headers["content-type"] == "application/json"
    f, a = front.json(), app.json()
    assert _shape(f) == _shape(a)
    assert f["usage"] == a["usage"]


def test_streams_match(gw: GatewayThread, key: str) -> None:
    body = {"model": MODEL, "messages": MSG, "max_tokens": 9, "stream": True,
            "stream_options": {"include_usage": True}}
    front, app = both(gw, "POST", "/v1/chat/completions", headers=auth(key), json=body)
    same_head(front, app)
    assert front.headers["transfer-encoding"] == app.headers["transfer-encoding"] == "chunked"

    def events(r: httpx.Response) -> list[Any]:
        out = [e.removeprefix(b"data: ") for e in r.content.split(b"\n\n") if e]
        return [e if e == b"[DONE]" else _shape(orjson.loads(e)) for e in out]

    assert events(front) == events(app)
