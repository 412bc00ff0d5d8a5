"""Real MCP servers (the official SDK, ``tests/mcp/tool_server.py``) started as
processes, a gateway config in front of them, and the official client through it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.examples_support import stop_process
from tests.gateway.harness import free_port

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def tool_server(name: str) -> Iterator[str]:
    """``python -m tests.mcp.tool_server NAME PORT``; yields its /mcp URL once it answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.mcp.tool_server", name, str(port)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"MCP server {name} did not start: {err}") from None
                time.sleep(0.1)
        yield url
    finally:
        stop_process(proc)
        if proc.stderr is not None:
            proc.stderr.close()


def gateway_config(fs_url: str, crm_url: str, **mcp: Any) -> dict[str, Any]:
    """Two tenants: ``acme`` may use fs (``inject`` only from its app ``ops``) and crm;
    ``globex`` only crm's ``echo``. ``acme``'s ``fs__read`` must stay under /srv/docs;
    a deny of any matching rule would win over every allow."""
    section: dict[str, Any] = {
        "servers": [
            {"name": "fs", "url": fs_url, "timeout_s": 2,
             "tools": {"big": {"max_result_tokens": 64},
                       "delete": {"destructive": True},
                       "read": {"rate": {"calls": 3, "per_s": 60}}}},
            {"name": "crm", "url": crm_url},
            {"name": "dead", "url": f"http://127.0.0.1:{free_port()}/mcp"},  # nobody there
        ],
        "rules": [
            {"tenant": "acme", "allow": ["fs__[rbds]*", "crm__*", "fs__file:///srv/docs/*",
                                          "dead__*"],
             "arguments": [{"tool": "fs__read", "argument": "path",
                            "pattern": "/srv/docs/"}]},
            {"tenant": "acme", "app": "ops", "allow": ["fs__inject"]},
            {"tenant": "globex", "allow": ["crm__echo"]},
        ],
    }
    section.update(mcp)
    return {
        "models": [{"alias": "sim-llama3-8b", "chat_template": "llama3",
                    "backends": [{"type": "sim", "replicas": 1}]}],
        "governance": {"injection": {"mode": "block"}},
        "mcp": section,
    }
