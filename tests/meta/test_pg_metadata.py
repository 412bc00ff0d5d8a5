"""Metadata in PostgreSQL: two gateways (different data directories) sharing one
``postgresql://`` URL share keys, revocations, organisation and limits; so does the
CLI with ``TOKENPLANE_DATABASE_URL`` set."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import openai
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tests.services import PG_DSN, fresh_pg_schema, run_aside
from tokenplane.meta.pg_meta import PgMeta, apply_meta_migrations
from tokenplane.meta.pg_stores import PgKeyStore

MODEL = "sim-llama3-8b"
MESSAGES: list[Any] = [{"role": "user", "content": "Hello there."}]
WAIT_S = 10.0  # generous: the poll is every 0.5 s; this only bounds a hung test


def _aside(fn: Any) -> Any:
    return run_aside(fn())


@pytest.fixture
def pg_url() -> Iterator[str]:
    with fresh_pg_schema("meta") as url:
        yield url


@pytest.fixture
def pair(pg_url: str, tmp_path: Path) -> Iterator[tuple[GatewayThread, GatewayThread]]:
    gws: list[GatewayThread] = []
    try:
        for name in ("a", "b"):
            cfg = sim_config(replicas=1, profile="instant")
            cfg["database_url"] = pg_url
            gws.append(GatewayThread(cfg, tmp_path / name).start())
        yield gws[0], gws[1]
    finally:
        for g in gws:
            g.stop()


def _meta(gw: GatewayThread) -> PgMeta:
    keys = gw.gateway.keys
    assert isinstance(keys, PgKeyStore)
    return keys.meta


def _synced(src: GatewayThread, dst: GatewayThread) -> None:
    """Wait until ``dst`` has loaded every change ``src`` has made."""
    assert _meta(dst).wait_loaded(_meta(src).loaded_version, WAIT_S)


def _chat(gw: GatewayThread, key: str) -> Any:
    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    try:
        return client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=3)
    finally:
        client.close()


def _admin(gw: GatewayThread, key: str) -> httpx.Client:
    return httpx.Client(base_url=gw.base_url.removesuffix("/v1") + "/admin/v1",
                        headers={"authorization": f"Bearer {key}"}, timeout=30)


def test_migrations_apply_once(pg_url: str) -> None:
    first, second = PgMeta(pg_url), PgMeta(pg_url)
    try:
        assert first.fetch("SELECT version FROM meta_migrations ORDER BY version") == [
            (1,), (2,), (3,)]
        assert second.fetch("SELECT count(*) FROM meta_version") == [(1,)]
    finally:
        first.close()
        second.close()

    async def again() -> list[int]:
        con = await asyncpg.connect(PG_DSN, server_settings={"search_path": schema})
        try:
            return await apply_meta_migrations(con, schema)
        finally:
            await con.close()

    schema = pg_url.rsplit("schema=", 1)[1]
    assert _aside(again) == []


def test_key_from_one_gateway_works_on_the_other_and_revocation_propagates(
        pair: tuple[GatewayThread, GatewayThread]) -> None:
    a, b = pair
    assert not (b.home / "meta.db").exists()
    admin_key = a.create_key("ops", admin=True)
    admin = _admin(a, admin_key)
    assert admin.post("/tenants", json={"name": "globex"}).status_code == 201
    made = admin.post("/tenants/globex/keys", json={"department": "rnd"})
    assert made.status_code == 201, made.text
    key, key_id = made.json()["key"], made.json()["id"]
    _synced(a, b)
    assert _chat(b, key).usage.completion_tokens > 0
    with _admin(b, admin_key) as other:
        assert "globex" in [t["name"] for t in other.get("/tenants").json()["data"]]

    assert admin.delete(f"/keys/{key_id}").status_code == 200
    _synced(a, b)
    with pytest.raises(openai.AuthenticationError):
        _chat(b, key)
    admin.close()


def test_limits_set_on_one_gateway_are_enforced_by_the_other(
        pair: tuple[GatewayThread, GatewayThread]) -> None:
    a, b = pair
    admin = _admin(a, a.create_key("ops", admin=True))
    key = a.create_key("initech", department="eng")
    _synced(a, b)
    _chat(b, key)
    put = admin.put("/limits", json={"target": {"tenant": "initech", "department": "eng"},
                                     "limits": {"rpm": 0}})
    assert put.status_code == 200, put.text
    _synced(a, b)
    with pytest.raises(openai.BadRequestError):  # rpm 0: request_exceeds_limit
        _chat(b, key)
    other_key = a.create_key("ops", admin=True)
    _synced(a, b)
    with _admin(b, other_key) as other:
        shown = other.get("/limits").json()["data"]
    assert [e["scope"] for e in shown] == ["department:initech/eng"]
    assert admin.delete("/limits", params={"tenant": "initech",
                                           "department": "eng"}).status_code == 200
    _synced(a, b)
    _chat(b, key)
    admin.close()


def test_cli_with_database_url_reaches_the_gateways(
        pair: tuple[GatewayThread, GatewayThread], pg_url: str, tmp_path: Path) -> None:
    a, b = pair
    env = {**os.environ, "TOKENPLANE_DATABASE_URL": pg_url, "COLUMNS": "200"}
    home = str(tmp_path / "cli")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tokenplane", *args, "--home", home],
                              capture_output=True, text=True, env=env, timeout=120)

    made = cli("keys", "create", "--tenant", "hooli", "--app", "search")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    version = _meta(a).fetch("SELECT version FROM meta_version")[0][0]
    assert _meta(b).wait_loaded(version, WAIT_S)
    _chat(b, key)
    limited = cli("limits", "set", "--tenant", "hooli", "--rpm", "0")
    assert limited.returncode == 0, limited.stderr
    version = _meta(a).fetch("SELECT version FROM meta_version")[0][0]
    assert _meta(a).wait_loaded(version, WAIT_S)
    with pytest.raises(openai.BadRequestError):  # rpm 0: request_exceeds_limit
        _chat(a, key)
    assert "hooli" in cli("limits", "show").stdout
    assert not (tmp_path / "cli" / "meta.db").exists()


def test_a_gateway_reconnects_after_losing_its_connection(
        pair: tuple[GatewayThread, GatewayThread]) -> None:
    a, b = pair
    (pid,), = _meta(b).fetch("SELECT pg_backend_pid()")

    async def terminate() -> None:
        con = await asyncpg.connect(PG_DSN)
        try:
            await con.execute("SELECT pg_terminate_backend($1)", pid)
        finally:
            await con.close()

    _aside(terminate)
    key = a.create_key("umbrella")
    _synced(a, b)
    _chat(b, key)
    assert _meta(b).fetch("SELECT pg_backend_pid()") != [(pid,)]


def test_limits_for_a_tenant_that_does_not_exist_are_refused_on_postgres(
        pair: tuple[GatewayThread, GatewayThread]) -> None:
    """One rule for every way in (issue 33, finding 10): PUT /admin/v1/limits refuses a
    tenant the shared directory does not have, as the CLI and POST do."""
    a, b = pair
    admin_key = a.create_key("ops", admin=True)
    _synced(a, b)
    with _admin(b, admin_key) as admin:
        r = admin.put("/limits", json={"target": {"tenant": "ghostco"}, "limits": {"rpm": 5}})
        assert r.status_code == 404, r.text
        err = r.json()["error"]
        assert (err["code"], err["param"]) == ("target_not_found", "target.tenant")
        assert admin.get("/limits", params={"tenant": "ghostco"}).json()["data"] == []
        assert admin.post("/tenants", json={"name": "ghostco"}).status_code == 201
        r = admin.put("/limits", json={"target": {"tenant": "ghostco"}, "limits": {"rpm": 5}})
        assert r.status_code == 200, r.text
