"""An MCP session opened on one replica continues on another when the session store is
the Redis they share (keys in the PostgreSQL metadata database they share); the tools'
rate windows are shared the same way."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.gateway.harness import GatewayThread
from tests.mcp.support import gateway_config, tool_server
from tests.services import REDIS_URL, fresh_pg_schema, fresh_redis_prefix


def _rpc(port: int, key: str, body: dict[str, Any], sid: str | None = None) -> httpx.Response:
    h = {"authorization": f"Bearer {key}", "accept": "application/json, text/event-stream"}
    if sid:
        h["mcp-session-id"] = sid
    return httpx.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=h, timeout=10)


def _known(gw: GatewayThread, key: str) -> None:
    deadline = time.monotonic() + 10
    while gw.gateway.keys.authenticate(key) is None:
        assert time.monotonic() < deadline, "the key never reached the second replica"
        time.sleep(0.1)


def test_session_continues_on_a_second_replica(tmp_path: Path) -> None:
    with tool_server("fs") as fs, tool_server("crm") as crm, \
            fresh_redis_prefix("mcp") as prefix, fresh_pg_schema("mcp") as pg:
        cfg = gateway_config(fs, crm, sessions="redis")
        cfg.update(redis_url=REDIS_URL, database_url=pg,
                   admission={"key_prefix": prefix})
        a = GatewayThread(cfg, tmp_path / "a").start()
        b = GatewayThread(cfg, tmp_path / "b").start()
        alone = GatewayThread(gateway_config(fs, crm), tmp_path / "c").start()
        try:
            key = a.create_key("globex")
            _known(b, key)
            init = _rpc(a.port, key, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": "2025-11-25"}})
            sid = init.headers["mcp-session-id"]
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "crm__echo", "arguments": {"text": "on b"}}}
            r = _rpc(b.port, key, call, sid)
            assert r.status_code == 200, r.text
            assert r.json()["result"]["content"][0]["text"] == "on b"
            # a replica with its sessions in memory (and its own keys) does not know it
            own = alone.create_key("globex")
            assert _rpc(alone.port, own, call, sid).status_code == 404
            # fs__read: 3 calls a minute per key, counted across the replicas
            acme = a.create_key("acme")
            _known(b, acme)
            sids = {}
            for gw in (a, b):
                got = _rpc(gw.port, acme, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                           "params": {"protocolVersion": "2025-11-25"}})
                sids[gw.port] = got.headers["mcp-session-id"]
            read = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "fs__read", "arguments": {"path": "/srv/docs/a"}}}
            answers = [_rpc(gw.port, acme, read, sids[gw.port]).json() for gw in (a, b, a, b)]
            assert ["result" in x for x in answers] == [True, True, True, False]
            assert answers[3]["error"]["code"] == -32029
            # ended on b: gone on a too
            h = {"authorization": f"Bearer {key}", "mcp-session-id": sid}
            assert httpx.delete(f"http://127.0.0.1:{b.port}/mcp", headers=h).status_code == 200
            assert _rpc(a.port, key, call, sid).status_code == 404
        finally:
            alone.stop()
            b.stop()
            a.stop()
