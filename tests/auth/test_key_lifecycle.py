"""Roles at work over real HTTP (the official SDK for inference): what a tenant-admin
may manage, a department-bound one, a viewer's read-only scope, read-only keys kept
off the inference API; key expiry, rotation with an overlap window and last use, in
SQLite and PostgreSQL; ``tokenplane keys`` create --role --expires, list, rotate."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.gateway_process import ROOT
from tests.gateway.harness import GatewayThread, sim_config
from tests.services import fresh_pg_schema
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.open_stores import open_key_store

MODEL = "sim-llama3-8b"
MESSAGES: list[Any] = [{"role": "user", "content": "Hello there."}]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["tenants"] = [{"name": "acme"}, {"name": "globex"}]
    cfg["admission"] = {"limits_reload_s": 0}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("keys"))).start()
    yield g
    g.stop()


As = Callable[[str], httpx.Client]


@pytest.fixture
def as_key(gw: GatewayThread) -> Iterator[As]:
    """An admin API client per key, closed after the test."""
    opened: list[httpx.Client] = []

    def make(key: str) -> httpx.Client:
        client = httpx.Client(base_url=gw.base_url.removesuffix("/v1") + "/admin/v1",
                              headers={"authorization": f"Bearer {key}"}, timeout=30)
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


def _chat(gw: GatewayThread, key: str) -> str:
    with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as client:
        reply = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=4)
    return reply.choices[0].message.content or ""


def test_a_tenant_admin_manages_its_own_tenant_only(gw: GatewayThread, as_key: As) -> None:
    boss = as_key(gw.create_key("acme", role="tenant-admin"))
    made = boss.post("/tenants/acme/keys", json={"name": "bot", "role": "inference",
                                                 "expires_in": "90d"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["role"] == "inference"
    assert 89 * 86400 < body["expires_at"] - time.time() <= 90 * 86400
    assert _chat(gw, body["key"])
    listed = boss.get("/tenants/acme/keys").json()["data"]
    assert body["id"] in {k["id"] for k in listed}
    assert {"role", "expires_at", "last_used_at"} <= listed[0].keys()
    assert boss.get("/tenants").json()["data"] == [
        t for t in as_key(gw.create_key("_operator", admin=True)).get("/tenants").json()["data"]
        if t["name"] == "acme"]
    for refused in (boss.post("/tenants/globex/keys", json={}),
                    boss.post("/tenants/acme/keys", json={"admin": True}),
                    boss.post("/tenants/acme/keys", json={"role": "operator"}),
                    boss.put("/limits", json={"target": {"tenant": "globex"},
                                              "limits": {"rpm": 5}}),
                    boss.get("/limits", params={"tenant": "globex"}),
                    boss.post("/tenants", json={"name": "initech"})):
        assert refused.status_code == 403, refused.text
    assert boss.put("/limits", json={"target": {"tenant": "acme"},
                                     "limits": {"rpm": 1000}}).status_code == 200
    other = gw.create_key("globex")
    other_id = next(k.id for k in gw.gateway.keys.list_keys("globex"))
    assert boss.delete(f"/keys/{other_id}").status_code == 403
    assert _chat(gw, other)  # still valid
    assert boss.delete(f"/keys/{body['id']}").status_code == 200
    with pytest.raises(openai.AuthenticationError):
        _chat(gw, body["key"])


def test_a_department_bound_tenant_admin(gw: GatewayThread, as_key: As) -> None:
    gw.gateway.keys.ensure_scope("acme", "ops", None)
    rnd = as_key(gw.create_key("acme", department="rnd", role="tenant-admin"))
    assert rnd.post("/tenants/acme/keys", json={"department": "rnd"}).status_code == 201
    assert rnd.post("/tenants/acme/keys", json={"department": "ops"}).status_code == 403
    assert rnd.post("/tenants/acme/keys", json={}).status_code == 403  # tenant-wide
    assert {k["department"] for k in rnd.get("/tenants/acme/keys").json()["data"]} == {"rnd"}
    assert [d["name"] for d in rnd.get("/tenants/acme/departments").json()["data"]] == ["rnd"]
    assert rnd.put("/limits", json={"target": {"tenant": "acme", "department": "ops"},
                                    "limits": {"rpm": 5}}).status_code == 403
    assert rnd.put("/limits", json={"target": {"tenant": "acme", "department": "rnd"},
                                    "limits": {"rpm": 500}}).status_code == 200


def test_read_only_keys(gw: GatewayThread, as_key: As) -> None:
    viewer_key = gw.create_key("acme", role="viewer")
    viewer = as_key(viewer_key)
    assert viewer.get("/limits").status_code == 200
    assert viewer.get("/tenants/acme/budget").status_code == 200
    put = viewer.put("/limits", json={"target": {"tenant": "acme"}, "limits": {"rpm": 1}})
    assert put.status_code == 403 and put.json()["error"]["code"] == "admin_required"
    assert viewer.get("/tenants/acme/keys").status_code == 403
    for role in ("viewer", "auditor"):
        with pytest.raises(openai.PermissionDeniedError) as err:
            _chat(gw, gw.create_key("acme", role=role))
        assert err.value.code == "key_scope"
    inference = gw.create_key("acme", role="inference")
    assert _chat(gw, inference)
    assert as_key(inference).get("/tenants/acme/budget").status_code == 403


def test_bad_role_and_lifetime_are_400(gw: GatewayThread, as_key: As) -> None:
    op = as_key(gw.create_key("_operator", admin=True))
    bad = op.post("/tenants/acme/keys", json={"role": "god"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_role"
    for lifetime in ("soon", "-5d", "0s", 90):
        bad = op.post("/tenants/acme/keys", json={"expires_in": lifetime})
        assert bad.status_code == 400, lifetime
        assert bad.json()["error"]["param"] == "expires_in"


def test_expiry_and_last_use(gw: GatewayThread, as_key: As) -> None:
    op = as_key(gw.create_key("_operator", admin=True))
    made = op.post("/tenants/acme/keys", json={"expires_in": "2s"}).json()
    assert _chat(gw, made["key"])
    assert gw.gateway.keys.flush_last_used() >= 1
    (rec,) = [r for r in gw.gateway.keys.list_keys("acme") if r.id == made["id"]]
    assert rec.last_used_at is not None and time.time() - rec.last_used_at < 30
    time.sleep(max(0.0, made["expires_at"] - time.time()) + 0.1)
    with pytest.raises(openai.AuthenticationError):
        _chat(gw, made["key"])


def _rotation(store: KeyStore) -> None:
    old_key, old = store.create_key("acme", name="svc", role="inference",
                                    expires_at=time.time() + 3600)
    new_key, new = store.rotate(old.id, overlap_s=1.0) or ("", old)
    assert new.id != old.id and (new.tenant, new.name, new.role) == ("acme", "svc", "inference")
    assert new.expires_at is not None and new.expires_at > time.time() + 3500
    assert store.authenticate(old_key) is not None  # the overlap window
    assert store.authenticate(new_key) is not None
    time.sleep(1.2)
    assert store.authenticate(old_key) is None
    assert store.authenticate(new_key) is not None
    assert store.rotate(old.id, 1.0) is None  # expired: nothing to rotate


def test_rotation_sqlite(tmp_path: Path) -> None:
    store = open_key_store(tmp_path, None)
    try:
        _rotation(store)
    finally:
        store.close()


@pytest.mark.postgres
def test_rotation_and_last_use_postgres(tmp_path: Path) -> None:
    with fresh_pg_schema("keys_rotation") as url:
        store = open_key_store(tmp_path, url)
        try:
            _rotation(store)
            key, rec = store.create_key("acme", role="viewer")
            assert store.authenticate(key) is not None
            assert store.flush_last_used() >= 1
            (again,) = [r for r in store.list_keys("acme") if r.id == rec.id]
            assert again.role == "viewer" and again.last_used_at is not None
        finally:
            store.close()


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
    return subprocess.run([sys.executable, "-m", "tokenplane", "keys", *args, "--home",
                           str(home)], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_keys_cli(tmp_path: Path) -> None:
    made = _cli(tmp_path, "create", "--tenant", "acme", "--role", "viewer", "--expires", "90d")
    assert made.returncode == 0, made.stderr
    assert "role=viewer" in made.stdout and "expires" in made.stdout
    key = made.stdout.strip().splitlines()[-1]
    store = KeyStore(tmp_path / "meta.db")
    try:
        principal = store.authenticate(key)
        assert principal is not None and principal.role == "viewer"
        (rec,) = store.list_keys("acme")
    finally:
        store.close()
    listed = _cli(tmp_path, "list")
    assert listed.returncode == 0 and rec.id in listed.stdout and "viewer" in listed.stdout
    rotated = _cli(tmp_path, "rotate", rec.id, "--overlap", "7d")
    assert rotated.returncode == 0, rotated.stderr
    assert f"rotated {rec.id} -> " in rotated.stdout
    bad = _cli(tmp_path, "create", "--tenant", "acme", "--role", "god")
    assert bad.returncode == 2 and "unknown role" in bad.stderr
    bad = _cli(tmp_path, "create", "--tenant", "acme", "--expires", "soon")
    assert bad.returncode == 2 and "not a duration" in bad.stderr
