"""Concurrency units come back when their holder cannot give them back (issue 13,
item 5), with real gateways and a real Redis:

* a gateway killed (``kill -9``) with requests in flight against a hung upstream:
  its ``max_concurrent`` slots are leases its heartbeat no longer renews, so a second
  gateway on the same Redis can use every slot within seconds (before: held for
  ``reservation_ttl_s``, 15 minutes);
* Redis frozen for 3 s (``CLIENT PAUSE`` on a private ``redis-server``) while
  requests finish: their settlements time out, and the commands of a client that
  gave up are dropped by Redis; they are queued and retried once it thaws, so every
  slot is free again within a heartbeat or two (before: left to expire in Redis).
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import redis
import yaml

from tests.admission.conftest import REDIS_URL
from tests.admission.gateway_procs import GatewayProcess
from tests.admission.held_upstream import HeldUpstream
from tests.admission.test_gateway_redis_down import PrivateRedis, private_redis
from tests.gateway.harness import GatewayThread
from tokenplane.admission.stores.resilient import ResilientStore
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.limit_store import LimitStore, LimitTarget

__all__ = ["private_redis"]

TENANT = "leases"
MODEL = "held-model"
SLOTS = 6
MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture
def upstream() -> Iterator[HeldUpstream]:
    up = HeldUpstream().start()
    yield up
    up.stop()


def _config(home: Path, redis_url: str, upstream: HeldUpstream,
            admission: dict[str, Any]) -> dict[str, Any]:
    return {
        "data_dir": str(home),
        "redis_url": redis_url,
        "admission": {"predict_output": False, "default_output_tokens": 4, **admission},
        "models": [{
            "alias": MODEL, "tokenizer": "cl100k_base", "context_window": 4096,
            "backends": [{"id": "held", "type": "vllm", "base_url": upstream.base_url}],
        }],
        "tenants": [{"name": TENANT}],
        "observe": {"metrics": {"listen": None}},  # replicas side by side: no shared port
    }


async def _chat(session: aiohttp.ClientSession, url: str, key: str) -> tuple[int, str]:
    async with session.post(url + "/chat/completions",
                            headers={"authorization": f"Bearer {key}"},
                            json={"model": MODEL, "messages": MESSAGES,
                                  "max_tokens": 4}) as resp:
        body = await resp.json()
        return resp.status, (body.get("error") or {}).get("code") or ""


async def _held(session: aiohttp.ClientSession, url: str, key: str) -> tuple[int, str]:
    """The status of ``max_concurrent`` now: one more request is refused at once, or
    it would reach the (hung) upstream and wait there."""
    try:
        return await asyncio.wait_for(_chat(session, url, key), 2.0)
    except TimeoutError:
        return 0, "admitted"


async def _reserved(session: aiohttp.ClientSession, url: str, key: str) -> int:
    base = url.removesuffix("/v1")
    async with session.get(f"{base}/admin/v1/tenants/{TENANT}/budget",
                           headers={"authorization": f"Bearer {key}"}) as resp:
        assert resp.status == 200, await resp.text()
        body = await resp.json()
    return sum(lim["reserved"] for scope in body["scopes"] for lim in scope["limits"]
               if lim["name"] == "max_concurrent")


async def test_killed_gateway_gives_its_slots_back_within_seconds(
        tmp_path: Path, redis_prefix: str, upstream: HeldUpstream) -> None:
    homes = [tmp_path / "a", tmp_path / "b"]
    homes[0].mkdir()
    keystore = KeyStore(homes[0] / "meta.db")
    key = keystore.create_key(TENANT, app="app")[0]
    keystore.close()
    limits = LimitStore(homes[0] / "meta.db")
    limits.set(LimitTarget(TENANT), {"max_concurrent": SLOTS})
    limits.close()
    shutil.copytree(homes[0], homes[1])  # a second replica: same keys and limits
    admission = {"key_prefix": redis_prefix, "lease_s": 2.0, "heartbeat_s": 0.5}
    procs = []
    for h in homes:
        path = h / "gateway.yaml"
        path.write_text(yaml.safe_dump(_config(h, REDIS_URL, upstream, admission)))
        procs.append(GatewayProcess(path, h / "stderr.log"))
    first, second = procs
    await asyncio.gather(first.start(), second.start())
    tasks: list[asyncio.Task[Any]] = []
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            tasks = [asyncio.create_task(_chat(session, first.url, key)) for _ in range(SLOTS)]
            assert await asyncio.to_thread(upstream.wait_requests, SLOTS)
            # every slot is held by the first gateway, for the second one too
            assert await _held(session, second.url, key) == (429, "concurrency_limit_exceeded")
            assert first.proc is not None
            first.proc.kill()  # kill -9 with SLOTS requests in flight
            await first.proc.wait()
            killed = time.monotonic()
            while await _reserved(session, second.url, key) > 0:
                assert time.monotonic() - killed < 10, "the dead gateway's slots stay held"
                await asyncio.sleep(0.2)
            freed_after = time.monotonic() - killed
            # the second gateway can now hold every slot, and no more
            tasks += [asyncio.create_task(_chat(session, second.url, key))
                      for _ in range(SLOTS)]
            assert await asyncio.to_thread(upstream.wait_requests, 2 * SLOTS)
            assert await _held(session, second.url, key) == (429, "concurrency_limit_exceeded")
            # its heartbeat keeps its live requests' leases: after several lease
            # lengths the slots are still held
            await asyncio.sleep(2 * 2.0)
            assert await _held(session, second.url, key) == (429, "concurrency_limit_exceeded")
            assert await _reserved(session, second.url, key) == SLOTS
            upstream.release()  # the held requests end, so the gateway stops at once
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        upstream.release()
        await asyncio.gather(*(p.stop() for p in procs))
    assert freed_after < 2.0 + 2.0  # lease_s, plus a probe's round


def test_redis_frozen_while_requests_finish_frees_every_slot(
        private_redis: PrivateRedis, tmp_path: Path, upstream: HeldUpstream) -> None:
    # leases far longer than the test: only the retried settlements can free the slots
    cfg = _config(tmp_path, f"redis://127.0.0.1:{private_redis.port}/0", upstream,
                  {"lease_s": 120.0, "heartbeat_s": 0.25, "timeout_s": 0.3,
                   "probe_interval_s": 0.2, "limits_reload_s": 0})
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        svc = gw.gateway.admission
        assert svc is not None and isinstance(svc.store, ResilientStore)
        store = svc.store
        svc.limits.set(LimitTarget(TENANT), {"max_concurrent": SLOTS})
        key = gw.create_key(TENANT, app="app")

        async def scenario() -> tuple[list[tuple[int, str]], float]:
            async with aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=0)) as session:
                tasks = [asyncio.create_task(_chat(session, gw.base_url, key))
                         for _ in range(SLOTS)]
                assert await asyncio.to_thread(upstream.wait_requests, SLOTS)
                admin = redis.Redis(port=private_redis.port)
                admin.execute_command("CLIENT", "PAUSE", "3000", "ALL")  # Redis freezes
                paused = time.monotonic()
                upstream.release()  # ... while every request finishes
                done = await asyncio.gather(*tasks)
                while store.stats.unavailable < 1:  # their settlements could not go
                    assert time.monotonic() - paused < 3, store.stats
                    await asyncio.sleep(0.05)
                await asyncio.to_thread(admin.ping)  # answered once the pause is over
                admin.close()
                thawed = time.monotonic()
                while await _reserved(session, gw.base_url, key) > 0:
                    assert time.monotonic() - thawed < 5, store.stats
                    await asyncio.sleep(0.1)
                freed = time.monotonic() - thawed
                # every slot is usable again: SLOTS requests at once are all served
                again = await asyncio.gather(*(_chat(session, gw.base_url, key)
                                               for _ in range(SLOTS)))
                return done + again, freed

        results, freed = asyncio.run(scenario())
        assert results == [(200, "")] * (2 * SLOTS)
        assert freed < 3.0
        assert store.pending == 0 and store.stats.retried_settlements >= SLOTS
        assert store.stats.orphaned_settlements == 0
    finally:
        gw.stop()
