"""Connection slots under a slow-header flood without a key (issue 33, finding 5):
when the pool runs low, the oldest connections that have not sent a whole request
are shed, so a new client (``/health``, an authenticated request) still gets in, and
a keep-alive connection that has sent its requests is never shed."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import openai

from tests.gateway.harness import GatewayThread, sim_config

CAP = 40
MODEL = "sim-llama3-8b"


def _slow(port: int, source: str) -> socket.socket:
    """A connection from ``source`` that sends part of a head, then nothing."""
    s = socket.socket()
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    return s


def test_slow_header_flood_from_several_addresses_leaves_room(tmp_path: Path) -> None:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["server"] = {"max_connections": CAP, "max_connections_per_address": 0,
                     "header_timeout_s": 60}
    cfg["observe"] = {"metrics": {"listen": None}}
    g = GatewayThread(cfg, tmp_path).start()
    flood: list[socket.socket] = []
    try:
        key = g.create_key("default", app="a")
        front = g.server.front if g.server is not None else None
        assert front is not None
        front.slow_s = 0.0  # every connection without a whole request counts as slow now
        base = f"http://127.0.0.1:{g.port}"
        # an authenticated client on a keep-alive connection, before the flood
        keep = httpx.Client(base_url=base, timeout=10)
        assert keep.get("/health").status_code == 200
        for i in range(2 * CAP):  # from 127.0.0.2 .. 127.0.0.6
            flood.append(_slow(g.port, f"127.0.0.{2 + i % 5}"))
        for _ in range(3):  # new clients get in: the oldest slow connections are shed
            with httpx.Client(base_url=base, timeout=10) as h:
                assert h.get("/health").status_code == 200
            with openai.OpenAI(base_url=g.base_url, api_key=key, max_retries=0,
                               timeout=10) as c:
                c.chat.completions.create(model=MODEL, max_tokens=3, messages=[
                    {"role": "user", "content": "hello"}])
            flood.extend(_slow(g.port, "127.0.0.2") for _ in range(5))  # and it goes on
        # the keep-alive connection that had sent a whole request was never shed
        assert keep.get("/health").status_code == 200
        keep.close()
        assert front.shed > 0
        assert front.admitted <= CAP + 1
    finally:
        for s in flood:
            s.close()
        g.stop()
