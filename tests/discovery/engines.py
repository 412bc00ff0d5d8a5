"""Simulated engine replicas over HTTP (``engine/serving/http_server.py``), one per
address, started and stopped one by one by a test (as pods come and go), all in one
background thread's loop."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from aiohttp import web

from tokenplane.engine.defaults import default_tokenizer, simple_prompt_ids
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.serving.http_server import build_engine_app
from tokenplane.engine.serving.service import EngineService

T = TypeVar("T")


def free_port_on(*hosts: str) -> int:
    """A port free on every one of ``hosts`` (so replicas can share it, as pods do)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((hosts[0], 0))
            port = int(s.getsockname()[1])
        try:
            for h in hosts[1:]:
                with socket.socket() as s:
                    s.bind((h, port))
        except OSError:
            continue
        return port
    raise AssertionError("no port free on every address")


class EngineFarm:
    def __init__(self, model: str, profile: str = "instant") -> None:
        self.model = model
        self.profile = profile
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.runners: dict[tuple[str, int], web.AppRunner] = {}

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def start(self, host: str, port: int, seed: int = 0) -> None:
        async def up() -> None:
            tok = default_tokenizer()
            svc = EngineService(get_profile(self.profile), tok, simple_prompt_ids(tok),
                                self.model, seed=seed)
            runner = web.AppRunner(build_engine_app([svc]), access_log=None,
                                   handler_cancellation=True)
            await runner.setup()
            await web.TCPSite(runner, host, port).start()
            self.runners[(host, port)] = runner

        self.call(up())

    def stop(self, host: str, port: int) -> None:
        runner = self.runners.pop((host, port), None)
        if runner is not None:
            self.call(runner.cleanup())

    def close(self) -> None:
        for key in list(self.runners):
            self.stop(*key)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
