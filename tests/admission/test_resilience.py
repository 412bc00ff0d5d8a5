"""Redis unreachable: fail closed (StoreUnavailable) or open on local limits; recovery."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
from collections.abc import AsyncIterator

import pytest

from tokenplane.admission import (
    Admission,
    Amounts,
    Denial,
    Grant,
    LimitTable,
    RedisStore,
    ResilientStore,
    Scope,
    ScopeLimits,
    StoreUnavailable,
)

NOW = 1_700_000_000.0
TENANT = Scope("tenant", "acme")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _admission(store: ResilientStore) -> Admission:
    return Admission(LimitTable({TENANT: ScopeLimits(rpm=10, max_concurrent=100)}), store)


async def test_closed_port_fail_closed_raises(caplog: pytest.LogCaptureFixture) -> None:
    store = ResilientStore(RedisStore.from_url(f"redis://127.0.0.1:{_free_port()}"),
                           mode="fail_closed")
    adm = _admission(store)
    with caplog.at_level(logging.ERROR, "tokenplane.admission"), \
            pytest.raises(StoreUnavailable, match="unreachable"):
        await adm.reserve([TENANT], Amounts(1), NOW)
    assert store.degraded and store.stats.unavailable == 1
    assert "failing closed" in caplog.text
    with pytest.raises(StoreUnavailable):  # inside the probe interval: no new attempt
        await adm.reserve([TENANT], Amounts(1), NOW + 0.5)
    await store.close()


async def test_closed_port_fail_open_divides_limits_by_replicas(
        caplog: pytest.LogCaptureFixture) -> None:
    store = ResilientStore(RedisStore.from_url(f"redis://127.0.0.1:{_free_port()}"),
                           mode="fail_open", replicas=2)
    adm = _admission(store)
    with caplog.at_level(logging.ERROR, "tokenplane.admission"):
        grants = [await adm.reserve([TENANT], Amounts(1), NOW + i * 0.01) for i in range(6)]
    assert [isinstance(g, Grant) for g in grants] == [True] * 5 + [False]
    refused = grants[-1]
    assert isinstance(refused, Denial) and refused.limit == 5  # the local share in force
    assert store.stats.fallback_ops == 6 and store.degraded
    assert "failing open" in caplog.text and caplog.text.count("failing open") == 1
    first = grants[0]
    assert isinstance(first, Grant)
    assert (await adm.reconcile(first, Amounts(1), NOW + 1)).found
    await store.close()


class PrivateRedis:
    """A throwaway redis-server on a free port that the test stops and starts."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            "redis-server", "--port", str(self.port), "--save", "", "--appendonly", "no",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        assert self.proc.stdout is not None
        while True:  # wait for the server to say it is ready
            line = await asyncio.wait_for(self.proc.stdout.readline(), 20)
            assert line, "redis-server exited before it was ready"
            if b"Ready to accept connections" in line:
                return

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None


@pytest.fixture
async def private_redis() -> AsyncIterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not on PATH")
    server = PrivateRedis()
    await server.start()
    yield server
    await server.stop()


@pytest.mark.parametrize("mode", ["fail_closed", "fail_open"])
async def test_redis_stopped_during_traffic_then_back(private_redis: PrivateRedis,
                                                      mode: str) -> None:
    primary = RedisStore.from_url(f"redis://127.0.0.1:{private_redis.port}")
    store = ResilientStore(primary, mode=mode, replicas=2,  # type: ignore[arg-type]
                           probe_interval_s=1.0)
    adm = _admission(store)
    before = await adm.reserve([TENANT], Amounts(1), NOW)
    assert isinstance(before, Grant) and not store.degraded
    await private_redis.stop()
    if mode == "fail_closed":
        with pytest.raises(StoreUnavailable):
            await adm.reserve([TENANT], Amounts(1), NOW + 1)
    else:
        during = await adm.reserve([TENANT], Amounts(1), NOW + 1)
        assert isinstance(during, Grant) and store.stats.fallback_ops == 1
        assert (await adm.reconcile(during, Amounts(1), NOW + 1.5)).found
    # A reservation held in Redis cannot settle while it is down: it waits in the
    # queue, behind the release of the reservation whose reserve failed (it may have
    # been made), and both are retried in order once Redis is back.
    assert not (await adm.reconcile(before, Amounts(1), NOW + 1.2)).found
    assert store.pending == 2 and store.stats.queued_settlements == 2
    assert store.stats.orphaned_settlements == 0
    assert store.degraded
    await private_redis.start()
    after = await adm.reserve([TENANT], Amounts(1), NOW + 3)
    assert isinstance(after, Grant)
    assert not store.degraded and store.stats.recoveries == 1
    assert primary.script_loads == 2  # the restarted server had to load the script again
    status = await adm.status("acme", TENANT, NOW + 3)
    assert status[0].spent == 1  # the fresh Redis holds exactly the new request
    await store.heartbeat(NOW + 3.5)  # the retries find nothing to settle there
    assert store.pending == 0 and store.stats.retried_settlements == 2
    assert (await adm.status("acme", TENANT, NOW + 3.5))[0].spent == 1
    await store.close()


async def test_make_store_follows_configuration() -> None:
    from tokenplane.admission import MemoryStore
    from tokenplane.admission.stores.factory import make_store

    assert isinstance(make_store(None), MemoryStore)
    store = make_store(f"redis://127.0.0.1:{_free_port()}", failure_mode="fail_open",
                       replicas=3)
    assert isinstance(store, ResilientStore)
    assert (store.mode, store.replicas) == ("fail_open", 3)
    adm = Admission(LimitTable({TENANT: ScopeLimits(rpm=9)}), store)
    granted = [await adm.reserve([TENANT], Amounts(1), NOW) for _ in range(4)]
    assert [isinstance(g, Grant) for g in granted] == [True, True, True, False]
    await store.close()
