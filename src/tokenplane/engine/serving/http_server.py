"""aiohttp front for simulated engine replicas (one replica per port, like vLLM)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from aiohttp import web

from tokenplane.engine.behaviour import SimBehaviour
from tokenplane.engine.defaults import PromptIds, default_tokenizer, simple_prompt_ids
from tokenplane.engine.generation import SimulatedDrop
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.serving.service import EngineService
from tokenplane.tokens.base import Tokenizer

SERVICES_KEY = web.AppKey("engine_services", list[EngineService])


def _pick(services: list[EngineService]) -> EngineService:
    """The least loaded service (a data-parallel group when given several)."""
    if len(services) == 1:
        return services[0]
    return min(services, key=lambda s: s.engine.num_running + s.engine.num_waiting)


def build_engine_app(services: list[EngineService]) -> web.Application:
    """An app answering for these services (normally one: one replica per port)."""
    if not services:
        raise ValueError("build_engine_app needs at least one EngineService")
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[SERVICES_KEY] = services

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        service = _pick(services)
        resp = await service.handle(request.method, request.path, body, request.headers)
        if resp.stream is None:
            return web.Response(status=resp.status, body=resp.body, headers=resp.headers)
        out = web.StreamResponse(status=resp.status, headers=resp.headers)
        stream = resp.stream
        try:
            await out.prepare(request)
            async for event in stream:
                await out.write(event)
            await out.write_eof()
        except SimulatedDrop:
            if request.transport is not None:
                request.transport.close()
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return out

    async def on_startup(app: web.Application) -> None:
        for service in services:
            await service.start()

    async def on_cleanup(app: web.Application) -> None:
        for service in services:
            await service.close()

    app.router.add_route("*", "/{tail:.*}", handler)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


async def serve_replicas(
    profile: str,
    host: str,
    port: int,
    replicas: int,
    *,
    model_name: str = "tokenplane-sim",
    tokenizer: Tokenizer | None = None,
    prompt_ids: PromptIds | None = None,
    max_model_len: int = 8192,
    record_bodies: bool = False,
    seed: int = 0,
    jitter: float = 0.0,
    behaviour: SimBehaviour | None = None,
    on_ready: Callable[[list[int]], None] | None = None,
) -> None:
    """Run ``replicas`` engines, replica i on ``port + i``, until cancelled.

    With ``port=0`` every replica takes a free port; ``on_ready`` receives the bound
    ports once all replicas listen.
    """
    if replicas < 1:
        raise ValueError("replicas must be >= 1")
    prof = get_profile(profile)
    tok = tokenizer if tokenizer is not None else default_tokenizer()
    build_ids = prompt_ids if prompt_ids is not None else simple_prompt_ids(tok)
    runners: list[web.AppRunner] = []
    ports: list[int] = []
    try:
        for i in range(replicas):
            service = EngineService(
                prof, tok, build_ids, model_name, max_model_len=max_model_len,
                record_bodies=record_bodies, seed=seed + i, jitter=jitter,
                behaviour=behaviour,
            )
            # a client that closes its connection cancels its handler, as vLLM aborts a
            # request whose client left (a non-stream one included: Generation.wait
            # aborts the engine request when cancelled)
            runner = web.AppRunner(build_engine_app([service]), access_log=None,
                                   handler_cancellation=True)
            await runner.setup()
            runners.append(runner)
            site = web.TCPSite(runner, host, port + i if port else 0)
            await site.start()
            ports.append(int(runner.addresses[-1][1]))
        if on_ready is not None:
            on_ready(ports)
        await asyncio.Event().wait()
    finally:
        for runner in reversed(runners):
            with contextlib.suppress(Exception):
                await runner.cleanup()
