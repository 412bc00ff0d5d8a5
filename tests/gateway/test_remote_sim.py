"""The gateway in front of simulated engines started by ``tokenplane sim`` (real HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.gateway.harness import GatewayThread
from tests.gateway.sim_process import start_sim, stop_sim


@pytest.fixture(scope="module")
def sim_ports() -> Iterator[list[int]]:
    proc, ports = start_sim(port=0, replicas=2)
    try:
        yield ports
    finally:
        stop_sim(proc)


def test_openai_client_through_gateway_to_http_sims(sim_ports: list[int], tmp_path: Path) -> None:
    cfg = {"models": [{
        "alias": "sim-llama3-8b", "tokenizer": "cl100k_base", "chat_template": "llama3",
        "context_window": 8192,
        "backends": [{"id": f"remote{i}", "type": "vllm", "base_url": f"http://127.0.0.1:{p}",
                      "model": "sim-llama3-8b"} for i, p in enumerate(sim_ports)],
    }]}
    gw = GatewayThread(cfg, tmp_path).start()
    key = gw.create_key("default", app="remote")
    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    msgs = [{"role": "user", "content": "Hello over HTTP"}]
    expected_prompt = len(gw.gateway.counters.prompt_ids("sim-llama3-8b").messages(msgs, None))
    for _ in range(4):
        r = client.chat.completions.create(model="sim-llama3-8b", messages=msgs, max_tokens=7)  # type: ignore[arg-type]
        assert r.usage is not None and r.usage.completion_tokens == 7
        assert r.usage.prompt_tokens == expected_prompt
    chunks = list(client.chat.completions.create(
        model="sim-llama3-8b", messages=msgs, max_tokens=11, stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True}))
    assert [c.usage.completion_tokens for c in chunks if c.usage] == [11]
    r2 = client.completions.create(model="sim-llama3-8b", prompt="abc", max_tokens=4)
    assert r2.usage is not None and r2.usage.completion_tokens == 4
    client.close()
    served = {ep.id: ep.served for ep in gw.gateway.pools["sim-llama3-8b"].endpoints}
    assert all(n > 0 for n in served.values()), served  # both replicas were used
    gw.stop()
    rows = gw.ledger_rows("app = 'remote'")
    assert len(rows) == 6 and all(r["usage_source"] == "upstream" for r in rows)
