"""Where the audit signing key lives, and what ``audit verify`` can then prove.

A real ``tokenplane serve`` process writes the log; an attacker who can write the
data directory rewrites it with a writer of their own, re-signed with whatever key
the data directory holds (their own when it holds none). With the key kept apart
(``governance.audit.key_file``), verify names the forgery; with nothing configured
(the key generated into the data directory) the gateway warns at start and verify
says "integrity only", never "intact".
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml
from pydantic import ValidationError

from tests.gateway.gateway_process import ROOT, GatewayProcess, create_key
from tokenplane.config.governance_schema import AuditConfig
from tokenplane.governance.audit.keyfile import resolve_key

from .audit_helpers import replay_with_key

WARNING = "AUDIT LOG IS NOT TAMPER-PROOF"
MODEL = "sim-llama3-8b"


def _config(tmp: Path, audit: dict[str, Any] | None) -> Path:
    cfg = yaml.safe_load((ROOT / "examples" / "minimal.yaml").read_text())
    if audit is not None:
        cfg["governance"] = {"audit": audit}
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOKENPLANE_AUDIT_KEY"}
    env["TOKENPLANE_HOME"] = str(home)
    return env


@contextmanager
def _served(tmp: Path, audit: dict[str, Any] | None) -> Iterator[tuple[str, Path]]:
    """A gateway process that answered two requests and was stopped; its stderr log
    and data directory."""
    home = tmp / "home"
    log = tmp / "gateway.log"
    env = _env(home)
    gw = GatewayProcess(_config(tmp, audit), env, log)
    try:
        key = create_key(env, "default", "app")
        with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=30) as c:
            for text in ("first", "second"):
                c.chat.completions.create(model=MODEL, max_tokens=2,
                                          messages=[{"role": "user", "content": text}])
        assert gw.terminate() == 0
    finally:
        gw.close()
    yield log.read_text(), home


def _verify(home: Path, *args: str) -> tuple[int, str]:
    return cli_rc(_env(home), "audit", "verify", "--home", str(home), *args)


def cli_rc(env: dict[str, str], *args: str) -> tuple[int, str]:
    """``python -m tokenplane ARGS``: exit code, stdout and stderr."""
    r = subprocess.run([sys.executable, "-m", "tokenplane", *args], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def _forge(home: Path, key: bytes) -> None:
    """Change who made the first request, and rewrite the worker's log with ``key``."""
    def change(rec: dict[str, Any]) -> None:
        if rec["content"]["request"][0]["content"] == "first":
            rec["principal"] = "mallory"

    replay_with_key(home / "audit" / "w0", key, change, checkpoint_every=100)


def test_key_outside_the_data_dir_catches_a_forged_and_resigned_log(tmp_path: Path) -> None:
    key_file = tmp_path / "keys" / "audit.key"
    key_file.parent.mkdir()
    key_file.write_text(secrets.token_hex(32) + "\n")
    with _served(tmp_path, {"key_file": str(key_file)}) as (log, home):
        assert WARNING not in log
        public = re.search(r"public key ([0-9a-f]{64})", log)
        assert public is not None
        assert not (home / "audit.key").exists()  # nothing to steal in the data dir
        code, out = _verify(home, "--key-file", str(key_file))
        assert code == 0 and "audit log intact: 2 records" in out, out
        assert _verify(home, "--public-key", public[1])[0] == 0
        # the attacker holds everything in the data directory: no key, so their own
        _forge(home, secrets.token_hex(32).encode())
        for how in (["--key-file", str(key_file)], ["--public-key", public[1]]):
            code, out = _verify(home, *how)
            assert code == 1 and "FAILED" in out and "not by the key given" in out, out


def test_no_key_configured_warns_at_start_and_verify_says_integrity_only(
        tmp_path: Path) -> None:
    with _served(tmp_path, None) as (log, home):
        assert WARNING in log and "governance.audit.key_file" in log
        key_file = home / "audit.key"
        assert key_file.stat().st_mode & 0o777 == 0o600
        code, out = _verify(home)
        assert code == 3 and "integrity only, not authenticity" in out, out
        assert "intact" not in out.split("exit 0 when intact")[0]
        # the exit code and the steps that keep the key apart (issue 31)
        assert "exit 3: integrity only" in out
        assert f"install -m 600 {key_file} /etc/tokenplane/audit.key" in out
        assert "governance.audit.key_file: /etc/tokenplane/audit.key" in out
        assert "tokenplane audit verify --key-file /etc/tokenplane/audit.key" in out
        # re-signed with the key found next to the log: verify cannot tell, and says so
        _forge(home, key_file.read_bytes().strip())
        code, out = _verify(home)
        assert code == 3 and "integrity only, not authenticity" in out, out
        # the same key given from elsewhere is still the one in the data directory
        moved = tmp_path / "moved.key"
        moved.write_bytes(key_file.read_bytes())
        code, out = _verify(home, "--key-file", str(moved))
        assert code == 3 and "a copy of the signing key is in the data directory" in out


def test_key_sources_and_their_order(tmp_path: Path) -> None:
    home = tmp_path / "home"
    outside = tmp_path / "audit.key"
    outside.write_text("x" * 32)
    key, src = resolve_key(home, "K", str(outside), env={"K": "y" * 32}) or (b"", None)
    assert key == b"x" * 32 and src is not None and src.kind == "file"
    assert not src.in_data_dir
    with pytest.raises(ValueError, match="does not exist"):
        resolve_key(home, "K", str(tmp_path / "nope.key"))
    home.mkdir()
    inside = home / "keys" / "k"
    inside.parent.mkdir()
    inside.write_text("z" * 32)
    found = resolve_key(home, "K", str(inside))
    assert found is not None and found[1].in_data_dir  # said so, but still next to the log
    found = resolve_key(home, "K", None, env={})
    assert found is not None and found[1].kind == "generated" and found[1].in_data_dir
    with pytest.raises(ValidationError, match="absolute path"):
        AuditConfig.model_validate({"key_file": "relative/audit.key"})
    # the name of earlier versions is still accepted
    assert AuditConfig.model_validate({"hmac_key_env": "MY_KEY"}).key_env == "MY_KEY"


def test_verify_cli_refuses_a_malformed_public_key(tmp_path: Path) -> None:
    code, out = cli_rc(_env(tmp_path), "audit", "verify", "--home", str(tmp_path),
                       "--public-key", "abc")
    assert code == 2 and "64 hex digits" in out
