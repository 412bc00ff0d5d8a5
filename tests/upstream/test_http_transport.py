"""HttpTransport over the HTTP/1.1 pool: a finished stream's connection is reused, and
closing that finished stream later must not touch the request now using it."""

from __future__ import annotations

from aiohttp import web

from tests.upstream.test_http1_client import _serve
from tokenplane.config.schema import TimeoutConfig
from tokenplane.upstream.http_transport import HttpTransport, server_root, versioned
from tokenplane.upstream.types import UpstreamRequest, UpstreamResponse


async def _answer(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    if not body.get("stream"):
        return web.json_response({"ok": True})
    resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(b"data: {}\n\ndata: [DONE]\n\n")
    await resp.write_eof()
    return resp


def _req(stream: bool) -> UpstreamRequest:
    return UpstreamRequest("/v1/chat/completions", b'{"stream": %s}' % (b"true" if stream else
                                                                          b"false"),
                           stream, TimeoutConfig.model_validate({}))


async def _drain(resp: UpstreamResponse) -> bytes:
    assert resp.events is not None
    out = b""
    async for part in resp.events:
        out += part
    return out


async def test_late_close_of_a_finished_stream_spares_the_reused_connection() -> None:
    runner, port = await _serve(_answer)
    t = HttpTransport(f"http://127.0.0.1:{port}")
    try:
        first = await t.send(_req(stream=True))
        assert await _drain(first) == b"data: {}\n\ndata: [DONE]\n\n"
        second = await t.send(_req(stream=True))  # on the same keep-alive connection
        await first.aclose()  # late close of the finished stream: must be a no-op now
        assert await _drain(second) == b"data: {}\n\ndata: [DONE]\n\n"
        third = await t.send(_req(stream=False))
        assert third.status == 200 and third.body == b'{"ok": true}'
        assert t._pool.opened == 1
    finally:
        await t.close()
        await runner.cleanup()


async def test_closing_an_unfinished_stream_drops_its_connection() -> None:
    runner, port = await _serve(_answer)
    t = HttpTransport(f"http://127.0.0.1:{port}")
    try:
        first = await t.send(_req(stream=True))
        await first.aclose()  # before reading anything
        second = await t.send(_req(stream=False))
        assert second.status == 200
        assert t._pool.opened == 2  # the abandoned connection was not reused
    finally:
        await t.close()
        await runner.cleanup()


async def test_a_base_url_with_the_api_version_is_not_given_it_twice() -> None:
    """OpenAI-SDK-style bases (``.../v1``, DashScope's ``.../compatible-mode/v1``) hold
    the version; a server root (vLLM, SGLang) gets the request's whole path."""
    paths: list[str] = []

    async def record(request: web.Request) -> web.StreamResponse:
        paths.append(request.path)
        return web.json_response({"ok": True})

    runner, port = await _serve(record)
    root = f"http://127.0.0.1:{port}"
    try:
        for base in (root, root + "/", root + "/v1", root + "/compatible-mode/v1/"):
            t = HttpTransport(base)
            try:
                assert (await t.send(_req(stream=False))).status == 200
            finally:
                await t.close()
        assert paths == ["/v1/chat/completions", "/v1/chat/completions",
                         "/v1/chat/completions", "/compatible-mode/v1/chat/completions"]
    finally:
        await runner.cleanup()


def test_server_root_drops_a_trailing_version() -> None:
    assert server_root("http://h:8000") == "http://h:8000"
    assert server_root("https://api.example.com/v1/") == "https://api.example.com"
    assert server_root("https://h/compatible-mode/v1") == "https://h/compatible-mode"
    assert server_root("https://h/v1beta") == "https://h"
    assert not versioned("https://h/vault") and versioned("https://h/api/v2")
