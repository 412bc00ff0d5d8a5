"""The engine over real HTTP: aiohttp app, the openai SDK as client, serve_replicas."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator

import aiohttp
import openai
import orjson
import pytest
from aiohttp.test_utils import TestServer

from tokenplane.engine.defaults import simple_prompt_ids
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.serving.http_server import build_engine_app, serve_replicas
from tokenplane.engine.serving.service import EngineService
from tokenplane.tokens.base import Tokenizer

MODEL = "sim-llama"


async def wait_until_idle(service: EngineService, limit_s: float = 5.0) -> None:
    """Wait (bounded) for the server to notice a client that went away."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(service.wait_idle(), limit_s)


@pytest.fixture
async def server(tokenizer: Tokenizer) -> AsyncIterator[tuple[TestServer, EngineService]]:
    profile = dataclasses.replace(get_profile("instant"), t_floor_s=0.001)
    svc = EngineService(profile, tokenizer, simple_prompt_ids(tokenizer), MODEL)
    srv = TestServer(build_engine_app([svc]))
    await srv.start_server()
    yield srv, svc
    await srv.close()


async def test_openai_sdk_chat_and_completions(
    server: tuple[TestServer, EngineService], tokenizer: Tokenizer
) -> None:
    srv, _svc = server
    client = openai.AsyncOpenAI(base_url=str(srv.make_url("/v1")), api_key="x", max_retries=0)
    try:
        chat = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=7
        )
        assert chat.usage is not None and chat.usage.completion_tokens == 7
        assert tokenizer.count(chat.choices[0].message.content or "") == 7
        stream = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=7,
            stream=True, stream_options={"include_usage": True},
        )
        text = ""
        usage = None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
            if chunk.usage is not None:
                usage = chunk.usage
        assert text == chat.choices[0].message.content
        assert usage is not None and usage.completion_tokens == 7
        comp = await client.completions.create(model=MODEL, prompt="Tell me", max_tokens=5)
        assert comp.usage is not None and comp.usage.completion_tokens == 5
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model=MODEL, messages=[], max_tokens=5)
    finally:
        await client.close()


async def test_client_disconnect_aborts_generation(
    server: tuple[TestServer, EngineService],
) -> None:
    srv, svc = server
    body = {"model": MODEL, "messages": [{"role": "user", "content": "go"}],
            "max_tokens": 5000, "stream": True}
    async with aiohttp.ClientSession() as session:
        resp = await session.post(srv.make_url("/v1/chat/completions"), json=body)
        assert resp.status == 200
        await resp.content.readuntil(b"\n\n")
        await resp.content.readuntil(b"\n\n")
        resp.close()  # the client goes away mid-stream
    await wait_until_idle(svc)
    stats = svc.engine.stats()
    assert stats.num_running == stats.num_waiting == 0
    assert stats.generation_tokens_total < 5000


async def test_fail_after_drops_connection(server: tuple[TestServer, EngineService]) -> None:
    srv, svc = server
    body = {"model": MODEL, "prompt": "go", "max_tokens": 1000, "stream": True}
    async with aiohttp.ClientSession() as session:
        resp = await session.post(srv.make_url("/v1/completions"), json=body,
                                  headers={"x-sim-fail-after": "2"})
        with pytest.raises(aiohttp.ClientPayloadError):
            await resp.read()
    assert not svc.engine.has_work()


async def test_metrics_and_errors_over_http(server: tuple[TestServer, EngineService]) -> None:
    srv, _svc = server
    async with aiohttp.ClientSession() as session:
        async with session.get(srv.make_url("/metrics")) as resp:
            assert resp.status == 200
            assert "vllm:kv_cache_usage_perc" in await resp.text()
        async with session.post(srv.make_url("/v1/chat/completions"), data=b"{") as resp:
            assert resp.status == 400
            assert orjson.loads(await resp.read())["error"]["type"] == "invalid_request_error"
        async with session.post(srv.make_url("/v1/chat/completions"), json={},
                                headers={"x-sim-fail": "429"}) as resp:
            assert resp.status == 429


async def test_serve_replicas_binds_one_port_per_replica() -> None:
    ready: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve_replicas("instant", "127.0.0.1", 0, 2, model_name=MODEL,
                       on_ready=ready.set_result)
    )
    try:
        ports = await asyncio.wait_for(ready, 30)
        assert len(set(ports)) == 2
        async with aiohttp.ClientSession() as session:
            for port in ports:
                async with session.get(f"http://127.0.0.1:{port}/v1/models") as resp:
                    assert (await resp.json())["data"][0]["id"] == MODEL
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
