"""The first start's admin key belongs to the operator's own tenant, and the banner
says where its hash really is (SQLite file or PostgreSQL database)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.gateway.gateway_process import ROOT
from tests.gateway.harness import free_port
from tests.services import fresh_pg_schema
from tokenplane.cli.main import build_cli
from tokenplane.cli.serve_cmd import OPERATOR_TENANT, _bootstrap
from tokenplane.compose.config_file import validate_config
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.open_stores import open_key_store

CONFIG = {"models": [{"alias": "m", "backends": [{"type": "sim"}]}],
          "tenants": [{"name": "acme"}, {"name": "globex"}]}


def _first_start(tmp_path: Path, url: str | None, capsys: pytest.CaptureFixture[str]
                 ) -> tuple[str, str]:
    cfg = validate_config({**CONFIG, "data_dir": str(tmp_path / "home"), "database_url": url})
    _bootstrap(cfg, "0.0.0.0", 8080)
    out = capsys.readouterr().out
    key = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith("tp-"))
    store = open_key_store(Path(cfg.data_dir or ""), url)
    try:
        principal = store.authenticate(key)
        assert principal is not None and principal.admin
        tenant = principal.tenant
        assert [k.tenant for k in store.list_keys(None)] == [OPERATOR_TENANT]
    finally:
        store.close()
    _bootstrap(cfg, "0.0.0.0", 8080)  # once only
    assert capsys.readouterr().out == ""
    return out, tenant


def test_sqlite_first_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, tenant = _first_start(tmp_path, None, capsys)
    assert tenant == OPERATOR_TENANT  # not acme, the first configured customer
    assert f"in {tmp_path / 'home' / 'meta.db'}" in out
    # issue 31: the banner says how to make another admin key if this one is lost,
    # and the command it prints does
    assert "Lost this key?" in out
    command = next(ln.strip() for ln in out.splitlines()
                   if ln.strip().startswith("tokenplane keys create"))
    assert command.endswith(f"--home {tmp_path / 'home'}")
    r = CliRunner().invoke(build_cli(), shlex.split(command)[1:])
    assert r.exit_code == 0, r.output
    store = open_key_store(tmp_path / "home", None)
    try:
        again = store.authenticate(r.output.strip().splitlines()[-1])
        assert again is not None and again.admin and again.tenant == OPERATOR_TENANT
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_first_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with fresh_pg_schema("bootstrap") as url:
        out, tenant = _first_start(tmp_path, url, capsys)
    assert tenant == OPERATOR_TENANT
    assert "in the PostgreSQL metadata database" in out
    assert str(tmp_path / "home") not in out  # the hash is not under the data directory
    assert "keys create --tenant _operator --admin --name recovery --config" in out
    assert url not in out  # the URL may carry a password


def _race(stores: list[KeyStore]) -> list[str]:
    """``create_first_key`` on each store from a thread of its own, released at once;
    the keys they created."""
    gate = threading.Barrier(len(stores))

    def one(store: KeyStore) -> tuple[str, object] | None:
        gate.wait()
        return store.create_first_key(OPERATOR_TENANT, "bootstrap")

    with ThreadPoolExecutor(len(stores)) as pool:
        results = list(pool.map(one, stores))
    return [r[0] for r in results if r is not None]


def test_sqlite_first_key_is_created_once(tmp_path: Path) -> None:
    stores = [open_key_store(tmp_path, None) for _ in range(6)]  # six connections
    try:
        created = _race(stores)
        assert len(created) == 1
        assert len(stores[0].list_keys(None)) == 1
        assert stores[0].create_first_key(OPERATOR_TENANT, "bootstrap") is None
    finally:
        for s in stores:
            s.close()


@pytest.mark.postgres
def test_two_replicas_starting_at_once_create_one_key(tmp_path: Path) -> None:
    """Two `tokenplane serve` processes, each with its own data directory and port, on
    one PostgreSQL database, started together: one prints a key, the other none, and
    the database holds one key, which authenticates."""
    with fresh_pg_schema("bootstrap_race") as url:
        path = tmp_path / "gw.yaml"
        path.write_text(yaml.safe_dump(CONFIG))
        procs = []
        for i in range(2):
            env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
            env.update(TOKENPLANE_HOME=str(tmp_path / f"home{i}"), TOKENPLANE_DATABASE_URL=url)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tokenplane", "serve", "--config", str(path),
                 "--port", str(free_port()), "--metrics-listen",
                 f"127.0.0.1:{free_port()}"], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True))
        outs = []
        try:
            for proc in procs:
                assert proc.stdout is not None
                seen = []
                for line in proc.stdout:
                    seen.append(line)
                    if "tokenplane gateway on" in line:
                        break
                else:
                    raise AssertionError(f"a replica exited with {proc.wait()}")
                outs.append("".join(seen))
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(60)
                assert proc.stdout is not None
                proc.stdout.close()
        keys = [ln.strip() for out in outs for ln in out.splitlines()
                if ln.strip().startswith("tp-")]
        assert len(keys) == 1, outs
        store = open_key_store(tmp_path, url)
        try:
            assert len(store.list_keys(None)) == 1
            principal = store.authenticate(keys[0])
            assert principal is not None and principal.admin
        finally:
            store.close()


@pytest.mark.postgres
def test_postgres_first_key_is_created_once(tmp_path: Path) -> None:
    with fresh_pg_schema("bootstrap_threads") as url:
        stores = [open_key_store(tmp_path, url) for _ in range(4)]  # four connections
        try:
            created = _race(stores)
            assert len(created) == 1
            assert len(stores[0].list_keys(None)) == 1
        finally:
            for s in stores:
                s.close()
