"""The host-local counter server (``serve --workers N`` without Redis) over its real
Unix socket: two workers' clients share one set of counters, a worker that stops
renewing its leases gives its concurrency units back within ``lease_s``, and a gone
server is a :class:`StoreUnavailable` (the configured failure mode then applies)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tokenplane.admission import Admission, Amounts, Denial, Grant, LimitTable, Scope, ScopeLimits
from tokenplane.admission.stores.base import StoreUnavailable
from tokenplane.admission.stores.local import LocalStore
from tokenplane.admission.stores.local_server import CounterServer

T0 = 1_700_000_000.0
TENANT = Scope("tenant", "acme")


@pytest.fixture
def server() -> Iterator[CounterServer]:
    with tempfile.TemporaryDirectory(prefix="tp-") as place:  # short: a socket path
        srv = CounterServer(Path(place) / "counters.sock")
        srv.start()
        yield srv
        srv.stop()


def _admission(store: LocalStore) -> Admission:
    table = LimitTable({TENANT: ScopeLimits(rpm=5, max_concurrent=3)})
    return Admission(table, store, ttl_s=900)


async def test_workers_share_counters_and_a_silent_worker_loses_its_leases(
        server: CounterServer) -> None:
    a = LocalStore(str(server.path), lease_s=2.0)
    b = LocalStore(str(server.path), lease_s=2.0)
    adm_a, adm_b = _admission(a), _admission(b)
    held = [await adm_a.reserve([TENANT], Amounts(1), T0) for _ in range(3)]
    assert all(isinstance(g, Grant) for g in held)
    refused = await adm_b.reserve([TENANT], Amounts(1), T0 + 0.1)
    assert isinstance(refused, Denial) and refused.code == "concurrency_limit_exceeded"
    await a.heartbeat(T0 + 1.5)  # a is alive: its leases run to T0 + 3.5
    assert isinstance(await adm_b.reserve([TENANT], Amounts(1), T0 + 3.0), Denial)
    # a stops beating (its process died): at T0 + 3.5 its units are back; the window
    # still counts its requests (rpm 5: 3 of a's, 1 refused of b's not counted)
    late = await adm_b.reserve([TENANT], Amounts(1), T0 + 3.6)
    assert isinstance(late, Grant)
    status = await adm_b.status("acme", TENANT, T0 + 3.6)
    assert {s.limit_name: s.spent + s.reserved for s in status} == {"rpm": 4,
                                                                    "max_concurrent": 1}
    # a settles late (it was only slow): nothing is given back twice
    for g in held:
        assert isinstance(g, Grant)
        assert (await adm_a.reconcile(g, Amounts(1), T0 + 3.7)).found
    status = await adm_b.status("acme", TENANT, T0 + 3.7)
    assert {s.limit_name: s.reserved for s in status}["max_concurrent"] == 1
    await a.close()
    await b.close()


async def test_gone_server_is_unavailable(server: CounterServer) -> None:
    store = LocalStore(str(server.path), lease_s=2.0, timeout_s=0.5)
    adm = _admission(store)
    assert isinstance(await adm.reserve([TENANT], Amounts(1), T0), Grant)
    server.stop()
    with pytest.raises(StoreUnavailable):
        await adm.reserve([TENANT], Amounts(1), T0 + 1)
    await store.close()


def test_config_refuses_a_lease_shorter_than_two_heartbeats() -> None:
    from tokenplane.compose.config_file import ConfigError, validate_config

    base = {"models": [{"alias": "m", "backends": [{"type": "sim"}]}]}
    assert validate_config(base).admission.lease_s == 5.0  # the defaults: 5 s, 1 s
    with pytest.raises(ConfigError) as info:
        validate_config({**base, "admission": {"lease_s": 1.5, "heartbeat_s": 1}})
    assert info.value.errors == [
        "admission: lease_s (1.5) must be at least twice heartbeat_s (1.0), or live "
        "requests lose their concurrency units"]
