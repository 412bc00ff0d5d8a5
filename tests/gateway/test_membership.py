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
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.discovery.engines import EngineFarm
from tests.discovery.load import wait_for
from tests.gateway.harness import GatewayThread, free_port, sim_config
from tokenplane.compose.endpoints import http_endpoint, sim_replica
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


def membership_series(gw: GatewayThread) -> set[tuple[str, str]]:
    """(endpoint, state) of ``tokenplane_endpoint_membership``, as /metrics has it."""
    text = generate_latest(gw.gateway.metrics.registry).decode()
    return {(f.labels["endpoint"], f.labels["state"])
            for fam in text_string_to_metric_families(text)
            if fam.name == "tokenplane_endpoint_membership" for f in fam.samples}


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
    assert membership_series(gw) == {("http/0", "joining"), ("sim/0", "serving")}
    for _ in range(6):  # nothing listens there yet: it fails, more than a breaker takes
        gw.call(routing.scraper.scrape_once())
    assert not joined.done() and "http/0" in routing.live.joining
    assert "http/0" not in routing.live.by_id
    for _ in range(3):  # every request goes to the replica that serves
        r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=2)
        assert r.usage is not None
    assert "http/0" not in served(gw)

    server = EngineFarm(ALIAS)
    try:
        server.start("127.0.0.1", port)
        gw.call(routing.scraper.scrape_once())  # its first healthy scrape
        gw.call(_wait(joined))
        assert "http/0" in routing.live.by_id and not routing.live.joining
        # its failed scrapes while joining did not open its breaker
        assert routing.live.by_id["http/0"].available(routing.router.clock())
        assert membership_series(gw) == {("http/0", "serving"), ("sim/0", "serving")}
        gw.call(_wait(gw.call(_drain(ms, "sim/0"))))  # the HTTP replica is left alone
        assert membership_series(gw) == {("http/0", "serving")}
        for _ in range(3):
            r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=2)
            assert r.usage is not None and r.usage.completion_tokens == 2
        assert served(gw) == {"http/0": 3}
    finally:
        server.close()
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


def test_a_queued_request_waits_out_a_drain_and_goes_to_the_replica_that_joins(
    tmp_path: Path,
) -> None:
    cfg = sim_config(replicas=1, profile="llama3-8b-a100")
    cfg["scheduling"] = {"max_num_seqs": 1}  # one request at a time per replica
    cfg["observe"] = {"metrics": {"listen": None}, "access_log": {"enabled": False}}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        key = gw.create_key("default", app="membership")
        c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60)
        ms = membership(gw)
        routing = gw.gateway.routing
        assert routing is not None and routing.hub is not None
        hub = routing.hub
        stream = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=120,
                                           stream=True)
        first = [next(stream)]  # the only replica is busy with it

        answers: list[Any] = []
        waiter = threading.Thread(target=lambda: answers.append(
            c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=4)))
        waiter.start()
        wait_for(gw, lambda: sum(len(s) for s in hub.queues.values()) == 1,
                 "the second request to queue")
        drained = gw.call(_drain(ms, "sim/0"))
        assert not drained.done()
        svc = add_sim(gw, "extra/0")  # it joins: the queued request is released to it
        waiter.join(60)
        assert len(answers) == 1 and answers[0].usage.completion_tokens == 4
        assert served(gw)["extra/0"] == 1
        rest = first + list(stream)
        assert rest[-1].choices[0].finish_reason == "length"
        gw.call(_wait(drained))
        assert [e.id for e in gw.gateway.pools[ALIAS].endpoints] == ["extra/0"]
        c.close()
        gw.call(svc.close())
    finally:
        gw.stop()


def test_a_drained_alias_spills_to_its_fallback_and_takes_traffic_back(
    tmp_path: Path,
) -> None:
    cfg = sim_config(replicas=1, fallbacks=["backup"])
    backup = dict(cfg["models"][0], alias="backup", fallbacks=[],
                  backends=[{"id": "bk", "type": "sim", "profile": "instant"}])
    cfg["models"].append(backup)
    cfg["observe"] = {"metrics": {"listen": None}, "access_log": {"enabled": False}}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        key = gw.create_key("default", app="membership")
        c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60)
        gw.call(_wait(gw.call(_drain(membership(gw), "sim/0"))))
        r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=3)
        assert r.usage is not None and r.usage.completion_tokens == 3
        assert gw.gateway.pools["backup"].endpoints[0].served == 1  # the fallback served
        svc = add_sim(gw, "back/0")
        r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=3)
        assert r.usage is not None
        assert served(gw) == {"back/0": 1}
        c.close()
        gw.call(svc.close())
    finally:
        gw.stop()


def test_a_replica_added_again_while_it_drains_serves_again(gw: GatewayThread) -> None:
    key = gw.create_key("default", app="membership")
    c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60)
    ms = membership(gw)
    stream = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=60,
                                       stream=True)
    chunks = [next(stream)]  # sim/0 is busy: its drain waits
    ep = gw.gateway.pools[ALIAS].endpoints[0]

    async def drain_then_add() -> tuple[asyncio.Future[None], asyncio.Future[None]]:
        drained = ms.drain("sim/0")
        assert ms.members(ALIAS) == []
        return drained, ms.add(ALIAS, ep)

    drained, back = gw.call(drain_then_add())
    assert drained.cancelled() and back.done()
    assert ms.members(ALIAS) == ["sim/0"] and not ep.draining
    r = c.chat.completions.create(model=ALIAS, messages=MSGS, max_tokens=3)
    assert r.usage is not None and r.usage.completion_tokens == 3
    chunks.extend(stream)
    assert chunks[-1].choices[0].finish_reason == "length"
    assert served(gw) == {"sim/0": 2}
    c.close()
