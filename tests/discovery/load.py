"""A steady stream of requests through the gateway with the official ``openai``
client (several threads, streamed and not), counting answers and failures, and
helpers that wait on the gateway's own state."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import openai

from tests.gateway.harness import GatewayThread


class Load:
    def __init__(self, gw: GatewayThread, key: str, model: str, workers: int = 3,
                 max_tokens: int = 12) -> None:
        self.gw = gw
        self.key = key
        self.model = model
        self.max_tokens = max_tokens
        self.ok = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                         for i in range(workers)]

    def start(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def _run(self, worker: int) -> None:
        c = openai.OpenAI(base_url=self.gw.base_url, api_key=self.key, max_retries=0,
                          timeout=60)
        n = 0
        while not self._stop.is_set():
            n += 1
            msgs: Any = [{"role": "user", "content": f"worker {worker} request {n}"}]
            try:
                if n % 2:
                    chunks = list(c.chat.completions.create(
                        model=self.model, messages=msgs, max_tokens=self.max_tokens,
                        stream=True, stream_options={"include_usage": True}))
                    usage = [ch.usage for ch in chunks if ch.usage is not None]
                    assert usage and usage[0].completion_tokens == self.max_tokens, chunks
                else:
                    r = c.chat.completions.create(model=self.model, messages=msgs,
                                                  max_tokens=self.max_tokens)
                    assert r.usage is not None
                    assert r.usage.completion_tokens == self.max_tokens
            except Exception as exc:  # every failure is reported by the test
                with self._lock:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
            else:
                with self._lock:
                    self.ok += 1
        c.close()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)


def wait_for(gw: GatewayThread, pred: Callable[[], bool], what: str,
             timeout: float = 30.0) -> None:
    """Waits until ``pred`` (run on the gateway's loop) holds. A bounded poll: the
    change comes from another thread or process (a fake API server's watch, a DNS
    answer, requests of the load) with nothing in the gateway to wait on."""

    async def poll() -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not pred():
            if loop.time() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            await asyncio.sleep(0.02)

    gw.call(poll(), timeout + 10)


def routable(gw: GatewayThread, alias: str) -> set[str]:
    """Ids of the alias's replicas that take new requests (not joining, not draining)."""
    routing = gw.gateway.routing
    assert routing is not None
    return {le.id for le in routing.live.of(alias) if not le.endpoint.draining}


def in_pool(gw: GatewayThread, alias: str) -> set[str]:
    return {ep.id for ep in gw.gateway.pools[alias].endpoints}


def served(gw: GatewayThread, alias: str) -> dict[str, int]:
    return {ep.id: ep.served for ep in gw.gateway.pools[alias].endpoints}
