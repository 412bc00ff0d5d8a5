"""Helpers of tests/test_examples.py: an HTTP endpoint in a thread (a hosted API, a
webhook receiver, an OTLP collector), ``tokenplane sim`` serving a given model name,
and the skip-or-fail rule for the real PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.gateway.harness import free_port

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    """One request an :class:`HttpStub` received."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class HttpStub:
    """An aiohttp app on 127.0.0.1:<port> in its own thread; ``seen`` keeps every
    request (headers lower-cased) before its handler answers it."""

    routes: dict[str, Handler]
    port: int = field(default_factory=free_port)
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.got = threading.Event()
        self._arrived = threading.Condition()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HttpStub:
        self._thread.start()

        async def up() -> None:
            app = web.Application()
            for path, handler in self.routes.items():
                app.router.add_post(path, self._recording(handler))
            self._runner = web.AppRunner(app, handle_signals=False)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(30)
        return self

    def _recording(self, handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            seen = Seen(request.path, {k.lower(): v for k, v in request.headers.items()},
                        await request.read())
            with self._arrived:
                self.seen.append(seen)
                self._arrived.notify_all()
            self.got.set()
            return await handler(request)
        return run

    def wait_seen(self, n: int, timeout: float = 10.0) -> bool:
        """Blocks until ``n`` requests have arrived (False if not within ``timeout``)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.seen) >= n, timeout)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(30)
            self._runner = None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def stop_process(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()
