"""Replicas join and leave a running gateway's pool (routing/gateway/membership.py):
an in-process simulated replica serves at once, an HTTP engine only after its first
healthy scrape; a drained replica takes no new request, finishes the ones it has,
then leaves; requests sent through the official ``openai`` client meanwhile never
fail."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web

from tests.gateway.harness import GatewayThread, free_port, sim_config
from tokenplane.compose.endpoints import http_endpoint, sim_replica
from tokenplane.engine.defaults import default_tokenizer, simple_prompt_ids
from tokenplane.engine.profiles import get_profile
from tokenplane.engine.serving.http_server import build_engine_app
from tokenplane.engine.serving.service import EngineService
from tokenplane.routing.gateway.membership import Membership

ALIAS = "sim-llama3-8b"
MSGS: list[Any] = [{"role": "user", "content": "Hello, replicas that come and go."}]


def membership(gw: GatewayThread) -> Membership:
    routing = gw.gateway.routing
    assert routing is not None
    return routing.membership


def add_sim(gw: GatewayThread, ep_id: str, seed: int = 7) -> EngineService:
    """An in-process simulated replica added to the alias's pool (started first)."""
    g = gw.gateway
    model = g.pools[ALIAS].model

    async def go() -> EngineService:
        ep, svc = sim_replica(model, model.backends[0], ep_id, g.counters, seed=seed)
        await svc.start()
        await membership(gw).add(ALIAS, ep)
        return svc

    return gw.call(go())


def served(gw: GatewayThread) -> dict[str, int]:
    return {ep.id: ep.served for ep in gw.gateway.pools[ALIAS].endpoints}


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1, profile="llama3-8b-a100")
    cfg["observe"] = {"metrics": {"listen": None}, "access_log": {"enabled": False}}
    g = GatewayThread(cfg, tmp_path).start()
    yield g
    g.stop()


def test_added_replica_serves_and_drained_one_finishes_its_stream_then_leaves(
    gw: GatewayThread,
) -> None:
    key = gw.create_key("default", app="membership")
    c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60)
    ms = membership(gw)
    (first,) = ms.members(ALIAS)

    # a long stream is in flight on the only replica
    stream = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=120,
                                       stream=True, stream_options={"include_usage": True})
    chunks = [next(stream)]
    assert gw.gateway.pools[ALIAS].endpoints[0].in_flight == 1

    svc = add_sim(gw, "extra/0")
    assert sorted(ms.members(ALIAS)) == sorted([first, "extra/0"])
    drained = gw.call(_drain(ms, first))  # the future, on the gateway's loop
    assert not drained.done()  # its stream is still running
    assert ms.members(ALIAS) == ["extra/0"]

    # new requests go to the new replica only, and succeed
    for _ in range(3):
        r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=4)
        assert r.usage is not None and r.usage.completion_tokens == 4
    assert served(gw)[first] == 0 and served(gw)["extra/0"] == 3

    chunks.extend(stream)  # the drained replica finishes the stream it had
    usage = [ch.usage for ch in chunks if ch.usage is not None]
    assert len(usage) == 1 and usage[0].completion_tokens == 120
    gw.call(_wait(drained))
    assert [e.id for e in gw.gateway.pools[ALIAS].endpoints] == ["extra/0"]
    routing = gw.gateway.routing
    assert routing is not None and first not in routing.live.by_id

    r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=4)
    assert r.usage is not None and r.usage.completion_tokens == 4
    c.close()
    gw.call(svc.close())


async def _drain(ms: Membership, ep_id: str) -> asyncio.Future[None]:
    return ms.drain(ep_id)


async def _wait(fut: asyncio.Future[None]) -> None:
    await asyncio.wait_for(asyncio.shield(fut), 30)


class EngineServer:
    """A simulated engine over HTTP on a port of its own, in its own thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.runner: web.AppRunner | None = None

    def start(self, model: str) -> None:
        async def up() -> None:
            tok = default_tokenizer()
            svc = EngineService(get_profile("instant"), tok, simple_prompt_ids(tok), model)
            self.runner = web.AppRunner(build_engine_app([svc]), access_log=None)
            await self.runner.setup()
            await web.TCPSite(self.runner, "127.0.0.1", self.port).start()

        asyncio.run_coroutine_threadsafe(up(), self.loop).result(30)

    def stop(self) -> None:
        if self.runner is not None:
            asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def test_http_replica_joins_only_after_a_healthy_scrape(gw: GatewayThread) -> None:
    key = gw.create_key("default", app="membership")
    c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60)
    ms = membership(gw)
    routing = gw.gateway.routing
    assert routing is not None
    port = free_port()
    model = gw.gateway.pools[ALIAS].model

    async def add() -> asyncio.Future[None]:
        ep = http_endpoint(model, model.backends[0],
                           "http/0", f"http://127.0.0.1:{port}")
        fut = ms.add(ALIAS, ep)
        await asyncio.sleep(0)  # let its first scrape start
        return fut

    joined = gw.call(add())
    gw.call(routing.scraper.scrape_once())  # nothing listens there yet: it fails
    assert not joined.done() and "http/0" in routing.live.joining
    assert "http/0" not in routing.live.by_id
    for _ in range(3):  # every request goes to the replica that serves
        r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=2)
        assert r.usage is not None
    assert "http/0" not in served(gw)

    server = EngineServer(port)
    try:
        server.start(ALIAS)
        gw.call(routing.scraper.scrape_once())  # its first healthy scrape
        gw.call(_wait(joined))
        assert "http/0" in routing.live.by_id and not routing.live.joining
        gw.call(_wait(gw.call(_drain(ms, "sim/0"))))  # the HTTP replica is left alone
        for _ in range(3):
            r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=2)
            assert r.usage is not None and r.usage.completion_tokens == 2
        assert served(gw) == {"http/0": 3}
    finally:
        server.stop()
    c.close()


def test_draining_a_joining_replica_removes_it_and_unknown_ids_are_refused(
    gw: GatewayThread,
) -> None:
    ms = membership(gw)
    routing = gw.gateway.routing
    assert routing is not None
    model = gw.gateway.pools[ALIAS].model

    async def go() -> None:
        ep = http_endpoint(model, model.backends[0],
                           "never/0", f"http://127.0.0.1:{free_port()}")
        joined = ms.add(ALIAS, ep)
        await ms.drain("never/0")
        assert joined.cancelled() and "never/0" not in routing.live.joining
        with pytest.raises(KeyError):
            ms.drain("nobody")
        with pytest.raises(ValueError):
            ms.add("no-such-alias", ep)

    gw.call(go())
