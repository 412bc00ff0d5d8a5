"""Signing out of the console ends the session on the server (issue 33, finding 3): a
copy of the old ``tp_console`` cookie gets the sign-in page, not the pages or
``usage.csv``, on this gateway and on another sharing its metadata database
(PostgreSQL: two gateways with their own data directories)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.console.conftest import Console
from tests.console.test_console_http import csrf_of
from tests.gateway.harness import GatewayThread, sim_config
from tests.meta.test_pg_metadata import WAIT_S
from tests.services import fresh_pg_schema
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.pg_stores import PgKeyStore


def _sign_in(base: str, key: str) -> tuple[httpx.Client, str]:
    h = httpx.Client(base_url=base, timeout=30)
    form = h.get("/console/login")
    r = h.post("/console/login", data={"key": key, "csrf": csrf_of(form.text)},
               headers={"origin": base})
    assert r.status_code == 303, r.text
    cookie = h.cookies.get("tp_console")
    assert cookie
    return h, cookie


def _with_cookie(base: str, cookie: str, path: str) -> httpx.Response:
    with httpx.Client(base_url=base, timeout=30) as h:
        h.cookies.set("tp_console", cookie, path="/console")
        return h.get(path)


def _sign_out(h: httpx.Client, base: str) -> None:
    page = h.get("/console/overview")
    out = h.post("/console/logout", data={"csrf": csrf_of(page.text)},
                 headers={"origin": base})
    assert out.status_code == 303


def test_the_old_cookie_is_refused_after_signing_out(console: Console) -> None:
    base = console.base
    h, cookie = _sign_in(base, console.acme)
    # a copy of the cookie works while the session lasts
    assert _with_cookie(base, cookie, "/console/overview").status_code == 200
    assert _with_cookie(base, cookie, "/console/usage.csv").status_code == 200
    _sign_out(h, base)
    h.close()
    for path in ("/console/overview", "/console/usage", "/console/usage.csv"):
        r = _with_cookie(base, cookie, path)
        assert r.status_code == 303 and r.headers["location"] == "/console/login", path
    # another session of the same key is not touched
    other, _ = _sign_in(base, console.acme)
    assert other.get("/console/overview").status_code == 200
    other.close()


def test_sign_out_reaches_every_worker_of_the_data_directory(tmp_path: Path) -> None:
    a, b = KeyStore(tmp_path / "meta.db"), KeyStore(tmp_path / "meta.db")
    try:
        assert not b.session_ended("s1")
        a.end_session("s1", 2e9)
        a.end_session("old", 1.0)  # already expired: forgotten at the next sign-out
        a.end_session("s2", 2e9)
        assert b.session_ended("s1") and b.session_ended("s2")
        assert not b.session_ended("old") and not b.session_ended("s3")
    finally:
        a.close()
        b.close()


@pytest.fixture
def pg_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[GatewayThread, GatewayThread]]:
    monkeypatch.setenv("TP_TEST_CONSOLE_SECRET", os.urandom(16).hex())
    gws: list[GatewayThread] = []
    with fresh_pg_schema("signout") as url:
        try:
            for name in ("a", "b"):
                cfg = sim_config(replicas=1, profile="instant")
                cfg["database_url"] = url
                cfg["console"] = {"secret_env": "TP_TEST_CONSOLE_SECRET"}
                cfg["observe"] = {"metrics": {"listen": None}}
                gws.append(GatewayThread(cfg, tmp_path / name).start())
            yield gws[0], gws[1]
        finally:
            for g in gws:
                g.stop()


def test_sign_out_on_one_replica_ends_the_session_on_the_other(
        pg_pair: tuple[GatewayThread, GatewayThread]) -> None:
    a, b = pg_pair
    base_a, base_b = (f"http://127.0.0.1:{g.port}" for g in (a, b))
    key = a.create_key("default", admin=True)
    keys_a, keys_b = a.gateway.keys, b.gateway.keys
    assert isinstance(keys_a, PgKeyStore) and isinstance(keys_b, PgKeyStore)
    assert keys_b.meta.wait_loaded(keys_a.meta.loaded_version, WAIT_S)
    h, cookie = _sign_in(base_a, key)
    assert _with_cookie(base_b, cookie, "/console/overview").status_code == 200
    _sign_out(h, base_a)
    h.close()
    assert keys_b.meta.wait_loaded(keys_a.meta.loaded_version, WAIT_S)
    r = _with_cookie(base_b, cookie, "/console/usage.csv")
    assert r.status_code == 303 and r.headers["location"] == "/console/login"
