"""A gateway as a real OS process (``python -m tokenplane serve``), for crash tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import yaml

from tests.gateway.harness import free_port

ROOT = Path(__file__).resolve().parents[2]


def cli(env: dict[str, str], *args: str) -> str:
    """Run ``python -m tokenplane ARGS``; its stdout."""
    out = subprocess.run([sys.executable, "-m", "tokenplane", *args], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


def create_key(env: dict[str, str], tenant: str, app: str) -> str:
    return cli(env, "keys", "create", "--tenant", tenant, "--app", app).strip().splitlines()[-1]


def _free_metrics_port(config: Path) -> Path:
    """The config with its metrics listener on a free port (not the default 9464, which
    gateways of tests running side by side would contend for), unless it names one."""
    cfg = yaml.safe_load(config.read_text()) or {}
    metrics = cfg.setdefault("observe", {}).setdefault("metrics", {})
    if "listen" in metrics:
        return config
    metrics["listen"] = f"127.0.0.1:{free_port()}"
    path = config.with_name(config.stem + ".test.yaml")
    path.write_text(yaml.safe_dump(cfg))
    return path


class GatewayProcess:
    def __init__(self, config: Path, env: dict[str, str], log: Path, workers: int = 1,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        config = _free_metrics_port(config)
        self._log: IO[bytes] = log.open("ab")
        cmd = [sys.executable, "-m", "tokenplane", "serve", "--config", str(config),
               "--port", str(self.port), "--workers", str(workers), *extra_args]
        self.proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=self._log)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # the banner is printed once the port listens
            if b"tokenplane gateway on" in line:
                break
        else:
            raise RuntimeError(f"gateway exited with {self.proc.wait()}; see {log}")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def worker_pids(self) -> list[int]:
        """Worker processes of ``serve --workers N`` (children running spawn_main)."""
        pid = self.proc.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        out = []
        for child in children:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
                out.append(int(child))
        return out

    def kill9(self, pid: int | None = None) -> None:
        os.kill(pid or self.proc.pid, signal.SIGKILL)
        if pid is None:
            self.proc.wait(30)

    def terminate(self) -> int:
        """SIGTERM (drains the journal into the ledger); the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self.close()
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            for child in self.worker_pids():
                os.kill(child, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait(30)
        if self.proc.stdout is not None and not self.proc.stdout.closed:
            self.proc.stdout.close()
        if not self._log.closed:
            self._log.close()
