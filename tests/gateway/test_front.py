"""The HTTP/1.1 front on the wire: keep-alive, pipelining, request bodies (chunked,
too large, 100-continue), malformed requests, connection handling, streams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tests.gateway.raw_http import Client, chunked, request

MODEL = "sim-llama3-8b"
LIMIT = 4096


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = {**sim_config(), "server": {"max_body_bytes": LIMIT}}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("front"))).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayThread) -> str:
    return gw.create_key("default", app="front")


def chat(max_tokens: int = 5, **extra: Any) -> bytes:
    return orjson.dumps({"model": MODEL, "max_tokens": max_tokens,
                         "messages": [{"role": "user", "content": "hi"}], **extra})


def post(key: str, body: bytes, path: str = "/v1/chat/completions", **kw: Any) -> bytes:
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json",
               **kw.pop("headers", {})}
    return request("POST", path, body, headers=headers, **kw)


def check_envelope(ans: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert ans.status == status, ans.body
    assert ans.headers["x-request-id"].startswith("req_")
    assert ans.headers["content-type"].startswith("application/json")
    err = ans.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    if code is not None:
        assert err["code"] == code, err
    return dict(err)


def test_keep_alive_reuses_one_connection(gw: GatewayThread, key: str) -> None:
    assert gw.server is not None and gw.server.front is not None
    with Client(gw.port) as c:
        ids = set()
        for _ in range(3):
            c.send(post(key, chat()))
            ans = c.answer()
            assert ans.status == 200 and ans.json()["object"] == "chat.completion"
            assert "connection" not in ans.headers
            assert int(ans.headers["content-length"]) == len(ans.body)
            ids.add(ans.headers["x-request-id"])
        assert len(ids) == 3
        c.send(request("GET", "/health"))  # a relayed route on the same connection
        assert c.answer().json() == {"status": "ok"}


def test_pipelined_requests_are_answered_in_order(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, chat(3)) + request("GET", "/health") + post(key, b"{nope")
               + post(key, chat(2, stream=True)) + post(key, chat(4)))
        first, health, bad, stream, last = (c.answer() for _ in range(5))
        assert first.json()["usage"]["completion_tokens"] == 3
        assert health.json() == {"status": "ok"}
        check_envelope(bad, 400)
        assert stream.headers["transfer-encoding"] == "chunked"
        assert stream.body.endswith(b"data: [DONE]\n\n")
        assert last.json()["usage"]["completion_tokens"] == 4
        assert len({a.headers["x-request-id"] for a in (first, bad, stream, last)}) == 4


def test_many_pipelined_requests_pause_and_resume_reading(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(b"".join(post(key, chat(1)) for _ in range(40)))
        for _ in range(40):
            assert c.answer().status == 200


def test_chunked_request_body(gw: GatewayThread, key: str) -> None:
    body = chat(6)
    with Client(gw.port) as c:
        c.send(post(key, b"", headers={"transfer-encoding": "chunked"})
               + chunked(body[:10], body[10:25], body[25:]))
        ans = c.answer()
        assert ans.status == 200, ans.body
        assert ans.json()["usage"]["completion_tokens"] == 6


def test_trailer_fields_are_not_the_next_requests_headers(gw: GatewayThread, key: str) -> None:
    body = chat(2)
    with Client(gw.port) as c:
        c.send(post(key, b"", headers={"transfer-encoding": "chunked"})
               + b"%x\r\n%b\r\n0\r\nauthorization: Bearer %b\r\n\r\n"
               % (len(body), body, key.encode())
               + request("POST", "/v1/chat/completions", body))
        assert c.answer().status == 200
        check_envelope(c.answer(), 401)


def test_413_by_content_length_before_the_body(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, b"", headers={"content-length": str(LIMIT + 1)}))
        err = check_envelope(c.answer(), 413, "request_too_large")
        assert str(LIMIT) in err["message"]
        assert c.closed_by_server()


def test_413_whole_body_sent_still_reads_the_answer(gw: GatewayThread, key: str) -> None:
    big = b'{"model": "x", "messages": [{"role": "user", "content": "' + b"a" * 200_000 + b'"}]}'
    with Client(gw.port) as c:
        c.send(post(key, big))
        check_envelope(c.answer(), 413, "request_too_large")
        assert c.closed_by_server()


def test_413_by_chunked_size(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, b"", headers={"transfer-encoding": "chunked"})
               + chunked(*[b"x" * 1000] * 6))
        check_envelope(c.answer(), 413, "request_too_large")
        assert c.closed_by_server()


def test_body_at_the_limit_is_read(gw: GatewayThread, key: str) -> None:
    body = chat(2)
    body = body[:-1] + b" " * (LIMIT - len(body)) + b"}"
    assert len(body) == LIMIT
    with Client(gw.port) as c:
        c.send(post(key, b"", headers={"transfer-encoding": "chunked"})
               + chunked(body[:2000], body[2000:]))
        assert c.answer().status == 200


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: abc\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n"
    b"transfer-encoding: chunked\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nbad header\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
])
def test_malformed_request_400_envelope(gw: GatewayThread, raw: bytes) -> None:
    with Client(gw.port) as c:
        c.send(raw)
        check_envelope(c.answer(), 400, "bad_http_request")
        assert c.closed_by_server()


def test_oversized_head_431(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, chat(), headers={f"x-h{i}": "v" * 1000 for i in range(70)}))
        check_envelope(c.answer(), 431, "headers_too_large")
        assert c.closed_by_server()
    with Client(gw.port) as c:
        c.send(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n")
        check_envelope(c.answer(), 431, "headers_too_large")
    with Client(gw.port) as c:  # many headers under the limit are fine
        c.send(post(key, chat(), headers={f"x-h{i}": "v" * 100 for i in range(100)}))
        assert c.answer().status == 200


@pytest.mark.parametrize("path", ["/v1/models", "/admin/v1/tenants", "/metrics"])
def test_relayed_routes_take_the_fronts_head_limits(gw: GatewayThread, key: str,
                                                     path: str) -> None:
    """A head the front accepts is not refused by the app it relays to (aiohttp's own
    limits, 8,190 bytes a line and 100 headers, answered in plain text without a
    request id); past the front's limit the answer is the front's 431 envelope."""
    big = {"authorization": f"Bearer {key}", "x-long": "v" * 9000,
           **{f"x-h{i}": "v" for i in range(150)}}
    with Client(gw.port) as c:
        c.send(request("GET", path, headers=big))
        ans = c.answer()  # served: 200, or the admin scope's 403 for a tenant key
        assert ans.status == (200 if path == "/v1/models" else 403), ans.body
        assert ans.headers["x-request-id"].startswith("req_")
    with Client(gw.port) as c:
        c.send(request("GET", path, headers={"x-long": "v" * 70_000}))
        check_envelope(c.answer(), 431, "headers_too_large")


def test_malformed_after_a_good_request(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, chat(2)) + b"NOT HTTP AT ALL\r\n\r\n")
        assert c.answer().status == 200
        check_envelope(c.answer(), 400, "bad_http_request")
        assert c.closed_by_server()


def test_connection_close(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, chat(), headers={"connection": "close"}))
        ans = c.answer()
        assert ans.status == 200 and ans.headers["connection"] == "close"
        assert c.closed_by_server()


def test_http_1_0(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, chat(), version="1.0"))
        ans = c.answer()
        assert ans.status == 200 and ans.version == "1.0"
        assert ans.headers["connection"] == "close"
        assert c.closed_by_server()
    with Client(gw.port) as c:  # HTTP/1.0 asking for keep-alive
        for _ in range(2):
            c.send(post(key, chat(), version="1.0", headers={"connection": "keep-alive"}))
            ans = c.answer()
            assert ans.status == 200 and ans.headers["connection"] == "keep-alive"


def test_http_1_0_stream_ends_with_the_connection(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, chat(5, stream=True), version="1.0"))
        ans = c.answer()
        assert ans.status == 200 and "transfer-encoding" not in ans.headers
        assert ans.body.endswith(b"data: [DONE]\n\n")
        assert c.eof


def test_expect_100_continue(gw: GatewayThread, key: str) -> None:
    body = chat(3)
    with Client(gw.port) as c:
        c.send(post(key, b"", headers={"expect": "100-continue",
                                       "content-length": str(len(body))}))
        assert c.answer().status == 100
        c.send(body)
        ans = c.answer()
        assert ans.status == 200 and ans.json()["usage"]["completion_tokens"] == 3
        # too large: refused at once, no 100
        c.send(post(key, b"", headers={"expect": "100-continue",
                                       "content-length": str(LIMIT * 2)}))
        check_envelope(c.answer(), 413)


def test_expect_100_continue_behind_a_pipelined_request(gw: GatewayThread, key: str) -> None:
    body = chat(2)
    with Client(gw.port) as c:
        c.send(post(key, chat(40, stream=True)) + post(
            key, b"", headers={"expect": "100-continue", "content-length": str(len(body))}))
        assert c.answer().status == 200  # the stream comes whole before the 100
        assert c.answer().status == 100
        c.send(body)
        assert c.answer().json()["usage"]["completion_tokens"] == 2


def test_wrong_method_on_an_inference_route(gw: GatewayThread) -> None:
    for method in ("GET", "PUT", "DELETE"):
        with Client(gw.port) as c:
            c.send(request(method, "/v1/embeddings"))
            err = check_envelope(c.answer(), 405, "method_not_allowed")
            assert method in err["message"]


def test_query_string_is_ignored_for_routing(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, chat(2), path="/v1/chat/completions?x=1"))
        ans = c.answer()
        assert ans.status == 200 and "server" not in ans.headers  # the front answered


def test_header_names_are_case_insensitive(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(request("POST", "/v1/chat/completions", chat(2),
                       headers={"AUTHORIZATION": f"Bearer {key}",
                                "Content-Type": "Application/JSON"}))
        assert c.answer().status == 200
        c.send(request("POST", "/v1/chat/completions", chat(2)))
        check_envelope(c.answer(), 401)


def test_streaming_with_the_openai_client(gw: GatewayThread, key: str) -> None:
    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=12,
        stream=True, stream_options={"include_usage": True},
    )
    assert raw.headers["content-type"] == "text/event-stream"
    assert raw.headers["x-request-id"].startswith("req_")
    chunks = list(raw.parse())
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and usage[0].completion_tokens == 12
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert gw.gateway.counters.tokenizer(MODEL).count(text) == 12
    client.close()


def test_stream_is_chunk_framed(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(post(key, chat(30, stream=True)))
        ans = c.answer()
        assert ans.headers["transfer-encoding"] == "chunked"
        assert ans.headers["cache-control"] == "no-cache"
        assert ans.chunks >= 2
        events = [e for e in ans.body.split(b"\n\n") if e]
        assert events[-1] == b"data: [DONE]"
        assert all(e.startswith(b"data: ") for e in events)


def test_head_on_an_inference_route_has_no_body(gw: GatewayThread, key: str) -> None:
    with Client(gw.port) as c:
        c.send(request("HEAD", "/v1/chat/completions") + post(key, chat(2)))
        c.sock.settimeout(10)
        data = b""
        while b'"chat.completion"' not in data:
            data += c.sock.recv(65536)
    first, rest = data.split(b"\r\n\r\n", 1)
    assert first.startswith(b"HTTP/1.1 405") and b"x-request-id: req_" in first
    assert rest.startswith(b"HTTP/1.1 200")
