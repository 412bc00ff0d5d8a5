"""The first start's admin key belongs to the operator's own tenant, and the banner
says where its hash really is (SQLite file or PostgreSQL database)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.services import fresh_pg_schema
from tokenplane.cli.main import build_cli
from tokenplane.cli.serve_cmd import OPERATOR_TENANT, _bootstrap
from tokenplane.compose.config_file import validate_config
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
