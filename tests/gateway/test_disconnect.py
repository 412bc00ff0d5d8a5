"""A client that goes away mid-stream: the engine stops and the tokens are billed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from tests.gateway.harness import GatewayThread, sim_config


def test_disconnect_cancels_upstream_and_meters_partial(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1, profile="llama3-8b-a100"), tmp_path).start()
    key = gw.create_key("default", app="disc")
    seen_text: list[str] = []

    async def client() -> None:
        async with aiohttp.ClientSession() as s:
            resp = await s.post(
                gw.base_url + "/chat/completions",
                headers={"authorization": f"Bearer {key}"},
                json={"model": "sim-llama3-8b", "stream": True, "max_tokens": 3000,
                      "messages": [{"role": "user", "content": "write a long story"}]},
            )
            async for line in resp.content:
                if line.startswith(b"data: {"):
                    delta = json.loads(line[6:])["choices"][0]["delta"].get("content")
                    if delta:
                        seen_text.append(delta)
                if len(seen_text) >= 5:
                    break
            resp.close()  # drop the connection mid-stream

    asyncio.run(client())
    svc = gw.gateway.services[0]

    async def wait_idle() -> tuple[int, int]:
        try:
            await asyncio.wait_for(svc.wait_idle(), 5)
        except TimeoutError:
            raise AssertionError("the engine kept generating after the client left") from None
        return svc.engine.stats().generation_tokens_total, gw.gateway.meter.stats().journaled

    generated, journaled = gw.call(wait_idle())
    assert generated < 3000  # the upstream request was cancelled
    assert journaled >= 1
    gw.stop()
    rows = gw.ledger_rows("app = 'disc'")
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "cancelled"
    assert row["usage_source"] == "estimated"
    assert row["input_tokens"] > 0
    # billed for what was generated and relayed: at least what the client saw
    assert len(seen_text) <= row["output_tokens"] <= generated
