"""Runs a real gateway (or simulated engines) on a real port in a background thread."""

from __future__ import annotations

import asyncio
import errno
import socket
import sqlite3
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from tokenplane.api.front.server import GatewayServer
from tokenplane.app import GATEWAY_KEY, METRICS_LISTENER, Gateway, build_app
from tokenplane.compose.config_file import validate_config
from tokenplane.config.schema import listen_address

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GatewayThread:
    """A gateway built from ``config`` serving on 127.0.0.1:<port> in its own loop."""

    def __init__(self, config: dict[str, Any], home: Path) -> None:
        config = dict(config)
        config["data_dir"] = str(home)
        self.config = validate_config(config)
        metrics = self.config.observe.metrics
        if metrics.listen is not None:  # a free port: tests run side by side
            host, _ = listen_address(metrics.listen)
            metrics.listen = f"{host}:0"
        self.home = home
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: GatewayServer | None = None
        self.app: web.Application | None = None
        self.inner_port = 0  # the app served directly, once a test asks (listen_inner)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def metrics_url(self) -> str:
        """``/metrics`` on the gateway's metrics listener."""
        assert self.app is not None
        listener = self.app[METRICS_LISTENER]
        assert listener is not None, "observe.metrics.listen is null"
        return f"http://{listener.host}:{listener.port}/metrics"

    @property
    def gateway(self) -> Gateway:
        assert self.app is not None
        return self.app[GATEWAY_KEY]

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> GatewayThread:
        self._thread.start()

        async def up() -> None:  # the same stack as ``tokenplane serve``
            for attempt in range(3):
                self.app = build_app(self.config)
                self.server = GatewayServer(self.app, "127.0.0.1", self.port)
                try:
                    await self.server.start()  # a failed start stops what it started
                except OSError as exc:
                    if exc.errno != errno.EADDRINUSE or attempt == 2:
                        raise
                    # another process took the free port between free_port() and the
                    # bind: let the kernel choose one this time
                    self.port = 0
                    continue
                self.port = self.server.port
                return

        self.call(up())
        return self

    def create_key(self, tenant: str = "default", **kw: Any) -> str:
        key, _ = self.gateway.keys.create_key(tenant, **kw)
        return key

    def stop(self) -> None:
        if self.server is not None:
            self.call(self.server.stop())
            self.server = None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def ledger_rows(self, where: str = "1=1") -> list[dict[str, Any]]:
        """Rows of the SQLite ledger (call after ``stop`` so the journal is drained)."""
        db = sqlite3.connect(self.home / "ledger.db")
        db.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in db.execute(f"SELECT * FROM usage_events WHERE {where}")]
        finally:
            db.close()


def sim_config(replicas: int = 2, profile: str = "instant", **model: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "alias": "sim-llama3-8b",
        "tokenizer": "cl100k_base",
        "chat_template": "llama3",
        "context_window": 4096,
        "prices": {"input": "0.10", "cached_input": "0.05", "output": "0.40"},
        "backends": [{"id": "sim", "type": "sim", "profile": profile, "replicas": replicas}],
    }
    m.update(model)
    return {"models": [m], "tenants": [{"name": "default"}, {"name": "acme"}]}
