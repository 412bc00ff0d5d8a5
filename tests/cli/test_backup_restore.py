"""Backup and restore give back the same usage report and working keys: the single
box's data directory (``tokenplane backup`` taken while the gateway serves, then
``tokenplane restore`` into a new directory), and the PostgreSQL deployment
(``pg_dump`` of the gateway's schema restored with ``pg_restore`` into a new
database), as docs/OPERATIONS.md says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.gateway.gateway_process import ROOT
from tests.gateway.harness import GatewayThread, sim_config
from tests.services import PG_DSN, fresh_pg_schema, run_aside
from tokenplane.meta.open_stores import open_key_store

MODEL = "sim-llama3-8b"


def _tp(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
    return subprocess.run([sys.executable, "-m", "tokenplane", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _usage(*where: str) -> list[dict[str, Any]]:
    out = _tp("usage", "--format", "json", "--by", "tenant,app,model", *where)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


def _serve_some(gw: GatewayThread) -> str:
    key = gw.create_key("acme", app="bot")
    with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as client:
        for i in range(3):
            client.chat.completions.create(model=MODEL, max_tokens=5 + i, messages=[
                {"role": "user", "content": f"request {i}"}])
    return key


def _until(check: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the ledger did not get the requests"
        time.sleep(0.2)


def test_single_box_backup_while_serving_and_restore(tmp_path: Path) -> None:
    home, copy, restored = tmp_path / "home", tmp_path / "backup", tmp_path / "restored"
    gw = GatewayThread(sim_config(replicas=1), home).start()
    try:
        key = _serve_some(gw)
        _until(lambda: sum(r["requests"] for r in _usage("--home", str(home))) == 3)
        before = _usage("--home", str(home))
        made = _tp("backup", "--home", str(home), "--out", str(copy))  # while serving
        assert made.returncode == 0, made.stderr
    finally:
        gw.stop()
    refused = _tp("restore", "--from", str(copy), "--home", str(home))
    assert refused.returncode == 2 and "already holds" in refused.stderr
    done = _tp("restore", "--from", str(copy), "--home", str(restored))
    assert done.returncode == 0, done.stderr
    assert _usage("--home", str(restored)) == before
    store = open_key_store(restored, None)
    try:
        principal = store.authenticate(key)
        assert principal is not None and principal.app == "bot"
    finally:
        store.close()
    (copy / "ledger.db").write_bytes(b"tampered")
    bad = _tp("restore", "--from", str(copy), "--home", str(tmp_path / "again"))
    assert bad.returncode == 2 and "changed since the backup" in bad.stderr


async def _sql(dsn: str, sql: str) -> None:
    import asyncpg

    con = await asyncpg.connect(dsn)
    try:
        await con.execute(sql)
    finally:
        await con.close()


@pytest.mark.postgres
def test_postgres_pg_dump_and_pg_restore(tmp_path: Path) -> None:
    for tool in ("pg_dump", "pg_restore"):
        if shutil.which(tool) is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{tool} is required in CI (Debian's postgresql-client)")
            pytest.skip(f"{tool} not installed")
    with fresh_pg_schema("backup") as url:
        schema = url.rsplit("schema=", 1)[1]
        cfg = {**sim_config(replicas=1), "database_url": url}
        gw = GatewayThread(cfg, tmp_path / "home").start()
        try:
            key = _serve_some(gw)
            _until(lambda: sum(r["requests"] for r in _usage("--database-url", url)) == 3)
        finally:
            gw.stop()
        before = _usage("--database-url", url)
        dump = tmp_path / "tokenplane.dump"
        dsn = url.split("?", 1)[0]
        out = subprocess.run(["pg_dump", "--format=custom", f"--schema={schema}",
                              f"--file={dump}", dsn], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
    # the original schema is gone: restore into a new database
    db = f"tp_restore_{uuid.uuid4().hex[:10]}"
    admin_dsn = PG_DSN
    new_dsn = PG_DSN.rsplit("/", 1)[0] + f"/{db}"
    run_aside(_sql(admin_dsn, f'CREATE DATABASE "{db}"'))
    try:
        out = subprocess.run(["pg_restore", "--no-owner", f"--dbname={new_dsn}", str(dump)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        restored = f"{new_dsn}?schema={schema}"
        assert _usage("--database-url", restored) == before
        store = open_key_store(tmp_path, restored)
        try:
            assert store.authenticate(key) is not None
        finally:
            store.close()
    finally:
        run_aside(_sql(admin_dsn, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
