"""The ledger tells the truth: cached and reasoning tokens survive streaming, an
upstream's zero is kept, missing usage is estimated (and marked), and the rollups are
the sums of the raw events after randomized traffic."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from tests.gateway.fake_upstream import REPLY, FakeUpstream
from tests.gateway.harness import GatewayThread, sim_config
from tests.gateway.ledger_checks import (
    assert_client_rollups_match,
    assert_rollups_match,
    read_ledger,
)
from tokenplane.operations.chat import CHAT

MODEL = "sim-llama3-8b"
SYSTEM = "You are a meticulous assistant who answers with care. " * 40


async def _stream(client: AsyncOpenAI, **kw: Any) -> tuple[str, Any]:
    async with client.chat.completions.with_streaming_response.create(
        model=MODEL, stream=True, stream_options={"include_usage": True}, **kw
    ) as resp:
        rid = resp.headers["x-request-id"]
        usage = None
        async for chunk in await resp.parse():
            if chunk.usage is not None:
                usage = chunk.usage
    return rid, usage


def test_cached_and_reasoning_tokens_survive_streaming(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1), tmp_path).start()
    key = gw.create_key("acme", app="stream")
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]

    async def run() -> list[tuple[str, Any]]:
        client = AsyncOpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
        out = []
        for _ in range(2):  # the second request hits the engine's prefix cache
            out.append(await _stream(client, messages=msgs, max_tokens=24,
                                     reasoning_effort="high"))
        await client.close()
        return out

    seen = asyncio.run(run())
    gw.stop()
    rows = {r["request_id"]: r for r in gw.ledger_rows()}
    assert seen[1][1].prompt_tokens_details.cached_tokens > 0
    for rid, usage in seen:
        row = rows[rid]
        assert row["usage_source"] == "upstream"
        assert row["input_tokens"] == usage.prompt_tokens
        assert row["cached_input_tokens"] == usage.prompt_tokens_details.cached_tokens
        assert row["output_tokens"] == usage.completion_tokens
        assert row["reasoning_tokens"] == usage.completion_tokens_details.reasoning_tokens > 0
        assert row["input_system"] > 0 and row["stream"] == 1
    # a cache hit is billed at the cached price: cheaper than the identical miss
    assert rows[seen[1][0]]["cost_micros"] < rows[seen[0][0]]["cost_micros"]


@pytest.mark.parametrize("stream", [False, True])
def test_reported_zero_kept_and_missing_usage_estimated(tmp_path: Path, stream: bool) -> None:
    up = FakeUpstream().start()
    cfg = sim_config(backends=[{"id": "fake", "type": "openai", "base_url": up.base_url}])
    gw = GatewayThread(cfg, tmp_path).start()
    key = gw.create_key("acme", app="edge")
    msgs = [{"role": "user", "content": "count these words please"}]

    async def one(client: AsyncOpenAI, mode: str) -> str:
        if stream:
            rid, _ = await _stream(client, messages=msgs, user=mode)
            return rid
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL, messages=msgs, user=mode)
        return raw.headers["x-request-id"]

    async def run() -> dict[str, str]:
        client = AsyncOpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
        ids = {mode: await one(client, mode) for mode in ("zero", "none", "normal")}
        await client.close()
        return ids

    ids = asyncio.run(run())
    estimate = gw.gateway.counters.count(gw.gateway.pools[MODEL].model, CHAT,
                                         {"messages": msgs}).counts.prompt
    reply_tokens = gw.gateway.counters.tokenizer(MODEL).count(REPLY)
    gw.stop()
    up.stop()
    rows = {r["request_id"]: r for r in gw.ledger_rows()}
    zero, none, normal = rows[ids["zero"]], rows[ids["none"]], rows[ids["normal"]]
    assert zero["usage_source"] == "upstream"
    assert (zero["input_tokens"], zero["output_tokens"], zero["cost_micros"]) == (0, 0, 0)
    assert zero["estimated_input_tokens"] == estimate > 0  # our count kept beside it
    assert none["usage_source"] == "estimated"
    assert none["input_tokens"] == none["estimated_input_tokens"] == estimate
    assert none["output_tokens"] == reply_tokens
    assert none["cost_micros"] > 0
    assert normal["usage_source"] == "upstream"
    assert (normal["input_tokens"], normal["output_tokens"]) == (7, 4)


def test_rollups_equal_raw_sums_after_randomized_traffic(tmp_path: Path) -> None:
    second = dict(sim_config()["models"][0], alias="sim-small", context_window=2048,
                  prices={"input": "0.30", "output": "1.20", "per_request": "0.0001"},
                  backends=[{"id": "sim-small", "type": "sim", "profile": "instant",
                             "replicas": 2}])  # endpoint ids are unique across aliases
    cfg = sim_config()
    cfg["models"].append(second)
    gw = GatewayThread(cfg, tmp_path).start()
    rng = random.Random(20261130)
    keys = [gw.create_key(t, department=d, app=a)
            for t, d, a in [("acme", "eng", "chat"), ("acme", "eng", "rag"),
                            ("acme", "ops", "chat"), ("default", "sales", "crm"),
                            ("default", None, None)]]
    words = ["tokens", "ledger", "finance", "rollup", "数据", "計算", "émoji", "🚀", "def",
             "f(x):", "return", "x"]

    async def one(client: AsyncOpenAI) -> None:
        model = rng.choice([MODEL, "sim-small", "sim-small", "no-such-model"])
        msgs: list[dict[str, Any]] = [{"role": "user", "content": " ".join(
            rng.choices(words, k=rng.randint(1, 60)))}]
        if rng.random() < 0.5:
            msgs.insert(0, {"role": "system", "content": rng.choice([SYSTEM, "Be brief."])})
        kw: dict[str, Any] = {"model": model, "messages": msgs,
                              "max_tokens": rng.randint(1, 40)}
        try:
            if rng.random() < 0.5:
                stream = await client.chat.completions.create(stream=True, **kw)
                async for _ in stream:
                    pass
            else:
                await client.chat.completions.create(**kw)
        except Exception as exc:  # the unknown model: a 404, still metered as an error
            assert model == "no-such-model", exc

    async def run() -> None:
        clients = [AsyncOpenAI(base_url=gw.base_url, api_key=k, max_retries=0) for k in keys]
        await asyncio.gather(*(one(rng.choice(clients)) for _ in range(160)))
        for c in clients:
            await c.close()

    asyncio.run(run())
    gw.stop()
    events, rollups = read_ledger(str(tmp_path / "ledger.db"))
    assert len(events) == 160
    assert {e["status"] for e in events} == {"ok", "error"}
    assert len({(e["tenant"], e["app"], e["model"]) for e in events}) >= 8
    assert_rollups_match(events, rollups)
    assert_client_rollups_match(str(tmp_path / "ledger.db"), events)
