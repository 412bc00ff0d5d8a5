"""A client that leaves mid-stream, with the engine behind real HTTP (``tokenplane
sim``): the gateway drops its upstream connection, the engine stops generating, and
the ledger bills what was generated so far."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import httpx

from tests.gateway.harness import GatewayThread
from tests.gateway.sim_process import engine_metric, start_sim, stop_sim


def test_disconnect_over_http_stops_the_engine(tmp_path: Path) -> None:
    proc, ports = start_sim(replicas=1, profile="llama3-8b-a100")
    try:
        port = ports[0]
        cfg = {"models": [{
            "alias": "m", "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 8192,
            "backends": [{"id": "remote", "type": "vllm", "base_url": f"http://127.0.0.1:{port}",
                          "model": "sim-llama3-8b"}],
        }]}
        gw = GatewayThread(cfg, tmp_path).start()
        key = gw.create_key("default", app="disc")
        seen: list[str] = []

        async def client() -> None:
            async with aiohttp.ClientSession() as s:
                resp = await s.post(
                    gw.base_url + "/chat/completions", headers={"authorization": f"Bearer {key}"},
                    json={"model": "m", "stream": True, "max_tokens": 3000,
                          "messages": [{"role": "user", "content": "write a long story"}]})
                async for line in resp.content:
                    if line.startswith(b"data: {"):
                        delta = json.loads(line[6:])["choices"][0]["delta"].get("content")
                        if delta:
                            seen.append(delta)
                    if len(seen) >= 5:
                        break
                resp.close()

        asyncio.run(client())
        gw.stop()  # the request has ended: the gateway dropped its upstream connection
        # The engine notices at its next token write. A request of its own, answered
        # only after 20 decode steps, lets that happen before the metrics are read.
        probe = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30, json={
            "model": "sim-llama3-8b", "max_tokens": 20,
            "messages": [{"role": "user", "content": "count to twenty"}]}).json()
        assert probe["usage"]["completion_tokens"] > 0
        assert engine_metric(port, "vllm:num_requests_running") == 0, \
            "the engine kept generating after the client left"
        generated = (engine_metric(port, "vllm:generation_tokens_total")
                     - probe["usage"]["completion_tokens"])
        assert generated < 3000
        rows = gw.ledger_rows("app = 'disc'")
        assert len(rows) == 1 and rows[0]["status"] == "cancelled"
        assert len(seen) <= rows[0]["output_tokens"] <= generated
    finally:
        stop_sim(proc)
