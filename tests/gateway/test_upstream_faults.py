"""Upstream faults map to 502 / 503 / 504; a retry goes to another replica only before
any token was sent, and every attempt is metered once."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web

from tests.gateway.harness import GatewayThread, free_port
from tokenplane.pipeline.upstream_errors import scrub


class FaultyUpstream:
    """A real HTTP server that misbehaves in the ways named by its path mode."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.port = free_port()
        self.hits = 0
        self.loop = asyncio.new_event_loop()
        self.stall = asyncio.Event()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits += 1
        await request.read()
        if self.mode == "500":
            return web.Response(status=500, text="boom")
        if self.mode == "401-echo":  # a provider quoting back the key it was sent
            auth = request.headers.get("authorization", "")
            return web.json_response(status=401, data={"error": {
                "message": f"Incorrect API key provided: {auth.removeprefix('Bearer ')}",
                "type": "invalid_request_error", "code": "invalid_api_key"}})
        if self.mode == "400-param":
            return web.json_response(status=400, data={"error": {
                "message": "temperature out of range; internal host gpu-7.corp:9000",
                "type": "invalid_request_error", "param": "temperature",
                "code": "bad_temperature"}})
        if self.mode == "400-vllm":  # vLLM / SGLang: the error object at the top level
            return web.json_response(status=400, data={
                "object": "error", "message": "max_tokens too large on gpu-7.corp",
                "type": "BadRequestError", "param": "max_tokens", "code": 400})
        if self.mode == "422-fastapi":  # a FastAPI server's validation error
            return web.json_response(status=422, data={"detail": [{
                "loc": ["body", "messages", 0, "content"], "msg": "bad content at gpu-7.corp",
                "type": "value_error"}]})
        if self.mode == "400-internal-param":  # a param naming nothing the client sent
            return web.json_response(status=400, data={"error": {
                "message": "bad engine arg", "type": "invalid_request_error",
                "param": "engine_args.kv_cache_dtype", "code": None}})
        if self.mode == "garbage-stream":
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n')
            await resp.write(b"data: {partial")
            return resp
        await self.stall.wait()  # "hang": never answers within the gateway's timeout
        return web.Response(text="{}")

    def start(self) -> FaultyUpstream:
        self._thread.start()

        async def up() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self.handle)
            self._runner = web.AppRunner(app, handle_signals=False)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(10)
        return self

    def stop(self) -> None:
        async def down() -> None:
            self.stall.set()
            assert self._runner is not None
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(down(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


def _config(backends: list[dict[str, Any]]) -> dict[str, Any]:
    return {"models": [{"alias": "m", "tokenizer": "cl100k_base", "backends": backends}]}


def _chat(gw: GatewayThread, key: str, stream: bool = False) -> httpx.Response:
    return httpx.post(gw.base_url + "/chat/completions", timeout=30,
                      headers={"authorization": f"Bearer {key}"},
                      json={"model": "m", "stream": stream, "temperature": 0.5,
                            "messages": [{"role": "user", "content": "hi"}]})


@pytest.fixture
def upstream(request: pytest.FixtureRequest) -> Iterator[FaultyUpstream]:
    u = FaultyUpstream(request.param).start()
    yield u
    u.stop()


@pytest.mark.parametrize("upstream", ["500"], indirect=True)
def test_upstream_500_is_502(upstream: FaultyUpstream, tmp_path: Path) -> None:
    gw = GatewayThread(_config([{"type": "vllm", "base_url": f"http://127.0.0.1:{upstream.port}"}]),
                       tmp_path).start()
    resp = _chat(gw, gw.create_key(app="f"))
    assert resp.status_code == 502 and resp.json()["error"]["type"] == "upstream_error"
    gw.stop()


def test_unreachable_upstream_is_503_and_each_attempt_metered(tmp_path: Path) -> None:
    dead = [{"id": f"dead{i}", "type": "vllm", "base_url": f"http://127.0.0.1:{free_port()}"}
            for i in range(2)]
    gw = GatewayThread(_config(dead), tmp_path).start()
    resp = _chat(gw, gw.create_key(app="f"))
    assert resp.status_code == 503
    assert "unreachable" in resp.json()["error"]["message"]
    rid = resp.headers["x-request-id"]
    gw.stop()
    rows = gw.ledger_rows(f"request_id = '{rid}'")
    assert sorted(r["attempt"] for r in rows) == [0, 1]  # retried once on the other replica
    assert {r["backend"] for r in rows} == {"dead0", "dead1"}
    assert all(r["status"] == "error" and r["output_tokens"] == 0 for r in rows)


def test_retry_lands_on_healthy_replica(tmp_path: Path) -> None:
    backends = [{"id": "dead", "type": "vllm", "base_url": f"http://127.0.0.1:{free_port()}"},
                {"id": "sim", "type": "sim", "profile": "instant"}]
    gw = GatewayThread(_config(backends), tmp_path).start()
    key = gw.create_key(app="f")
    codes = [_chat(gw, key).status_code for _ in range(6)]
    assert codes == [200] * 6
    gw.stop()
    ok = gw.ledger_rows("status = 'ok'")
    assert len(ok) == 6 and all(r["backend"] == "sim/0" for r in ok)


@pytest.mark.parametrize("upstream", ["hang"], indirect=True)
def test_timeouts_are_504(upstream: FaultyUpstream, tmp_path: Path) -> None:
    backend = {"type": "vllm", "base_url": f"http://127.0.0.1:{upstream.port}",
               "timeouts": {"first_token": 0.3, "total": 0.6}}
    gw = GatewayThread(_config([backend]), tmp_path).start()
    key = gw.create_key(app="f")
    streamed = _chat(gw, key, stream=True)  # no first token within first_token
    assert streamed.status_code == 504, streamed.text
    whole = _chat(gw, key)  # a non-stream answer is bounded by the total timeout
    assert whole.status_code == 504
    assert whole.json()["error"]["code"] == "upstream_timeout"
    gw.stop()


@pytest.mark.parametrize("upstream", ["garbage-stream"], indirect=True)
def test_broken_stream_ends_with_error_event(upstream: FaultyUpstream, tmp_path: Path) -> None:
    gw = GatewayThread(_config([{"type": "vllm", "base_url": f"http://127.0.0.1:{upstream.port}"}]),
                       tmp_path).start()
    resp = _chat(gw, gw.create_key(app="f"), stream=True)
    assert resp.status_code == 200
    events = [e for e in resp.text.split("\n\n") if e]
    assert events[0].startswith('data: {"choices"')
    assert '"error"' in events[-2] and events[-1] == "data: [DONE]"
    assert upstream.hits == 1  # never retried after a token reached the client
    gw.stop()
    (row,) = gw.ledger_rows()
    assert row["status"] == "error" and row["output_tokens"] == 1


SECRET = "sk-test-0123456789abcdefSECRET"


@pytest.mark.parametrize("upstream", ["401-echo"], indirect=True)
def test_upstream_text_and_key_never_reach_the_tenant(
        upstream: FaultyUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("FAULTY_KEY", SECRET)
    gw = GatewayThread(_config([{"type": "openai", "base_url": f"http://127.0.0.1:{upstream.port}",
                                 "api_key_env": "FAULTY_KEY"}]), tmp_path).start()
    try:
        with caplog.at_level(logging.WARNING, "tokenplane.upstream"):
            resp = _chat(gw, gw.create_key(app="f"))
        assert upstream.hits >= 1
        assert resp.status_code == 502
        err = resp.json()["error"]
        assert (err["type"], err["code"]) == ("upstream_error", "upstream_error")
        assert SECRET not in resp.text and "Incorrect API key" not in resp.text
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert "Incorrect API key provided: [redacted]" in logged  # kept for the operator
        assert SECRET not in logged
    finally:
        gw.stop()


@pytest.mark.parametrize("upstream", ["400-param"], indirect=True)
def test_an_upstream_400_keeps_its_status_and_param_not_its_text(
        upstream: FaultyUpstream, tmp_path: Path) -> None:
    gw = GatewayThread(_config([{"type": "vllm", "base_url": f"http://127.0.0.1:{upstream.port}"}]),
                       tmp_path).start()
    try:
        resp = _chat(gw, gw.create_key(app="f"))
        assert resp.status_code == 400
        err = resp.json()["error"]
        assert (err["param"], err["code"]) == ("temperature", "upstream_invalid_request")
        assert "gpu-7.corp" not in resp.text and "x-request-id" in resp.headers
    finally:
        gw.stop()


@pytest.mark.parametrize(("upstream", "status", "param"), [
    ("400-vllm", 400, "max_tokens"),
    ("422-fastapi", 422, "messages[0].content"),
    ("400-internal-param", 400, None),
], indirect=["upstream"])
@pytest.mark.parametrize("stream", [False, True])
def test_the_upstreams_param_reaches_the_client_when_it_names_a_request_field(
        upstream: FaultyUpstream, tmp_path: Path, status: int, param: str | None,
        stream: bool) -> None:
    """vLLM and SGLang put the error object at the top level and FastAPI reports a
    location: the param is kept when it names a field the client sent, and dropped when
    it names anything else; the upstream's text never reaches the client."""
    gw = GatewayThread(_config([{"type": "vllm", "base_url": f"http://127.0.0.1:{upstream.port}"}]),
                       tmp_path).start()
    try:
        client = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key(app="f"),
                               max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            kw: dict[str, Any] = {"model": "m", "max_tokens": 5,
                                  "messages": [{"role": "user", "content": "hi"}]}
            if stream:
                for _ in client.chat.completions.create(stream=True, **kw):
                    pass
            else:
                client.chat.completions.create(**kw)
        exc = info.value
        assert exc.status_code == status
        body = exc.body if isinstance(exc.body, dict) else {}
        assert body.get("param") == param and body.get("code") == "upstream_invalid_request"
        assert "gpu-7.corp" not in str(exc.body) and exc.response.headers.get("x-request-id")
    finally:
        gw.stop()


def test_scrub_removes_credentials() -> None:
    text = "key sk-abcdefgh12345678 and Bearer abc.def and tok " + "A" * 40 + " mine: s3cr3t!"
    out = scrub(text, ("s3cr3t!",))
    assert "sk-abcdefgh" not in out and "abc.def" not in out and "A" * 40 not in out
    assert "s3cr3t!" not in out and out.count("[redacted]") == 4
