"""Starts ``tokenplane sim`` as a child process and waits for its readiness line."""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time

import httpx


def start_sim(port: int = 0, replicas: int = 1, profile: str = "instant",
              timeout: float = 60, model: str | None = None, extra: tuple[str, ...] = (),
              ) -> tuple[subprocess.Popen[bytes], list[int]]:
    """The process and its replicas' ports, once ``tokenplane sim`` says ``ready``
    (``model``: the name the engines serve, else the sim's default; ``extra``: more
    arguments)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenplane", "sim", "--profile", profile, "--port", str(port),
         "--replicas", str(replicas), *(["--model", model] if model else []), *extra],
        env={**os.environ}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                raise AssertionError("tokenplane sim did not become ready")
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"tokenplane sim exited with {proc.wait(10)}")
            if line.startswith(b"ready "):
                return proc, [int(p) for p in line.split()[1:]]
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    finally:
        sel.close()


def stop_sim(proc: subprocess.Popen[bytes], kill: bool = False) -> None:
    if proc.poll() is None:
        proc.kill() if kill else proc.terminate()
    proc.wait(20)
    if proc.stdout is not None:
        proc.stdout.close()


def engine_metric(port: int, name: str) -> float:
    """One sample of a simulated replica's vLLM-style ``/metrics``."""
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the engine's metrics")
