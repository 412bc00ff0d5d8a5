"""``tokenplane serve`` refuses to start with one line and exit code 2 when its port
or metrics port is taken, its data directory is held by another gateway, PostgreSQL
or Redis does not answer, or the audit key is bad; and in each case it has created
no admin key (nothing printed, nothing stored)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.gateway.gateway_process import ROOT, GatewayProcess
from tests.gateway.harness import free_port

CONFIG = {"models": [{"alias": "m", "backends": [{"type": "sim", "replicas": 1}]}],
          "tenants": [{"name": "acme"}]}


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENPLANE_")}
    env["TOKENPLANE_HOME"] = str(home)
    env.update(extra)
    return env


def _config(tmp_path: Path, **changes: object) -> Path:
    cfg = {**CONFIG, "observe": {"metrics": {"listen": f"127.0.0.1:{free_port()}"}},
           **changes}
    path = tmp_path / "gw.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _serve(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tokenplane", "serve", "--config",
                           str(config), *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def held_port() -> Iterator[int]:
    sock = socket.create_server(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def _refused(out: subprocess.CompletedProcess[str], home: Path) -> str:
    """The one line of a refusal; no key was printed or stored."""
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()
             and not ln.startswith("warning:")]
    assert len(lines) == 1, out.stderr
    assert "tp-" not in out.stdout and "copy it now" not in out.stdout
    assert not (home / "meta.db").exists() or _no_keys(home / "meta.db")
    return lines[0]


def _no_keys(db: Path) -> bool:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return bool(con.execute("SELECT COUNT(*) FROM api_keys").fetchone()[0] == 0)
    except sqlite3.OperationalError:
        return True
    finally:
        con.close()


def test_port_busy(tmp_path: Path, held_port: int) -> None:
    home = tmp_path / "home"
    line = _refused(_serve(_config(tmp_path), _env(home), "--port", str(held_port)), home)
    assert line.startswith(f"server: cannot listen on 127.0.0.1:{held_port}: the port is "
                           "in use")
    assert "--port" in line


def test_metrics_port_taken(tmp_path: Path, held_port: int) -> None:
    home = tmp_path / "home"
    out = _serve(_config(tmp_path), _env(home), "--port", str(free_port()),
                 "--metrics-listen", f"127.0.0.1:{held_port}")
    line = _refused(out, home)
    assert line.startswith(f"observe.metrics.listen: cannot listen on 127.0.0.1:{held_port}")
    assert "--metrics-listen" in line


def test_unreachable_postgres(tmp_path: Path) -> None:
    home = tmp_path / "home"
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/nothing"
    out = _serve(_config(tmp_path), _env(home, TOKENPLANE_DATABASE_URL=dead),
                 "--port", str(free_port()))
    line = _refused(out, home)
    assert line.startswith("database_url: cannot reach PostgreSQL at 127.0.0.1:")
    assert "$TOKENPLANE_DATABASE_URL" in line


def test_unreachable_redis(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = _serve(_config(tmp_path, redis_url=f"redis://127.0.0.1:{free_port()}/0"),
                 _env(home), "--port", str(free_port()))
    line = _refused(out, home)
    assert line.startswith("redis_url: cannot reach Redis at 127.0.0.1:")


def test_bad_audit_key(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = _serve(_config(tmp_path), _env(home, TOKENPLANE_AUDIT_KEY="short"),
                 "--port", str(free_port()))
    line = _refused(out, home)
    assert line.startswith("governance.audit: bad audit key: $TOKENPLANE_AUDIT_KEY must "
                           "hold at least 16 bytes")


def test_missing_audit_key_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cfg = _config(tmp_path, governance={"audit": {"key_file": str(tmp_path / "nope.key")}})
    line = _refused(_serve(cfg, _env(home), "--port", str(free_port())), home)
    assert "does not exist" in line and "governance.audit.key_file" in line


def test_bad_set(tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = _serve(_config(tmp_path), _env(home), "--set", "server.port=not-a-port")
    line = _refused(out, home)
    assert line.startswith("server.port:")


def test_data_dir_held_by_a_serving_gateway(tmp_path: Path) -> None:
    """A second gateway on the first's data directory (another port) is refused while
    the first serves, and starts once it has stopped; --set and --metrics-listen reach
    the serving gateway."""
    home = tmp_path / "home"
    env = _env(home)
    metrics = free_port()
    first = GatewayProcess(_config(tmp_path), env, tmp_path / "first.log",
                           extra_args=("--metrics-listen", f"127.0.0.1:{metrics}",
                                       "--set", "server.max_connections=77"))
    try:
        import httpx

        r = httpx.get(f"http://127.0.0.1:{metrics}/metrics", timeout=10)
        assert r.status_code == 200 and "tokenplane_" in r.text
        line = _refused_keeping(_serve(_config(tmp_path), env, "--port", str(free_port())))
        assert line.startswith(f"data_dir: {home} is held by another gateway (pid "
                               f"{first.proc.pid})")
    finally:
        assert first.terminate() == 0
    second = GatewayProcess(_config(tmp_path), env, tmp_path / "second.log")
    second.close()


def _refused_keeping(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()
             and not ln.startswith("warning:")]
    assert len(lines) == 1, out.stderr
    assert "tp-" not in out.stdout
    return lines[0]
