"""``POST /admin/v1/tenants`` is exact under races (issue 13, item 17): creating a
tenant is one insert-or-fail that the table's primary key decides, so of two
concurrent creates of one name exactly one gets 201 and the other 409, on SQLite and
on PostgreSQL. Before, a check then an insert let both through (two replicas on
PostgreSQL each checked their own copy of the tables)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tests.services import fresh_pg_schema
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.pg_meta import PgMeta
from tokenplane.meta.pg_stores import PgKeyStore

NAMES = [f"race{i}" for i in range(8)]


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[GatewayThread, GatewayThread]]:
    gws: list[GatewayThread] = []
    with fresh_pg_schema("race") as url:
        try:
            for name in ("a", "b"):
                cfg = sim_config(replicas=1, profile="instant")
                cfg["database_url"] = url
                gws.append(GatewayThread(cfg, tmp_path / name).start())
            yield gws[0], gws[1]
        finally:
            for g in gws:
                g.stop()


def _admin(gw: GatewayThread, key: str) -> httpx.Client:
    return httpx.Client(base_url=gw.base_url.removesuffix("/v1") + "/admin/v1",
                        headers={"authorization": f"Bearer {key}"}, timeout=30)


def test_two_replicas_creating_one_tenant_at_once_get_201_and_409(
        pair: tuple[GatewayThread, GatewayThread]) -> None:
    a, b = pair
    key = a.create_key("ops", admin=True)
    keys_a, keys_b = a.gateway.keys, b.gateway.keys
    assert isinstance(keys_a, PgKeyStore) and isinstance(keys_b, PgKeyStore)
    assert keys_b.meta.wait_loaded(keys_a.meta.loaded_version, 10)  # b knows the key
    clients = [_admin(a, key), _admin(b, key)]
    try:
        with ThreadPoolExecutor(2) as pool:
            for name in NAMES:
                gate = threading.Barrier(2)

                def create(client: httpx.Client, name: str = name,
                           gate: threading.Barrier = gate) -> httpx.Response:
                    gate.wait()
                    return client.post("/tenants", json={"name": name})

                answers = list(pool.map(create, clients))
                assert sorted(r.status_code for r in answers) == [201, 409], name
                lost = next(r for r in answers if r.status_code == 409)
                assert lost.json()["error"]["code"] == "already_exists"
        listed = [t["name"] for t in clients[0].get("/tenants").json()["data"]]
        assert all(listed.count(n) == 1 for n in NAMES)
    finally:
        for c in clients:
            c.close()


def _race(stores: list[KeyStore], name: str) -> list[bool]:
    gate = threading.Barrier(len(stores))

    def create(store: KeyStore) -> bool:
        gate.wait()
        return store.create_tenant(name)

    with ThreadPoolExecutor(len(stores)) as pool:
        return list(pool.map(create, stores))


def test_sqlite_create_tenant_is_insert_or_fail(tmp_path: Path) -> None:
    """Several processes' connections (workers of one host) on one meta.db."""
    stores = [KeyStore(tmp_path / "meta.db") for _ in range(4)]
    try:
        for name in NAMES:
            assert sorted(_race(stores, name)) == [False, False, False, True], name
    finally:
        for s in stores:
            s.close()


def test_postgres_create_tenant_is_insert_or_fail() -> None:
    with fresh_pg_schema("race") as url:
        stores: list[KeyStore] = [PgKeyStore(PgMeta(url)) for _ in range(3)]
        try:
            for name in NAMES:
                assert sorted(_race(stores, name)) == [False, False, True], name
        finally:
            for s in stores:
                s.close()
