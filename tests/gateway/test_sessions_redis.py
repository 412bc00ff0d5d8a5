"""A session budget shared by two gateway replicas through Redis: steps sent at once to
both never spend more than the cap, and the step numbers come from one counter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
from openai import AsyncOpenAI

from tests.gateway.harness import GatewayThread, sim_config
from tests.services import REDIS_URL, fresh_redis_prefix

CAP = 3000
MODEL = "sim-llama3-8b"


def _config(prefix: str) -> dict[str, Any]:
    cfg = sim_config(replicas=1)
    cfg["redis_url"] = REDIS_URL
    cfg["admission"] = {"predict_output": False, "key_prefix": prefix}
    cfg["sessions"] = {"budget": {"max_tokens": CAP}}
    return cfg


def test_two_replicas_share_the_session_cap_and_its_steps(tmp_path: Path) -> None:
    with fresh_redis_prefix("sessions") as prefix:
        gws = [GatewayThread(_config(prefix), tmp_path / f"gw{i}").start() for i in range(2)]
        try:
            keys = [gw.create_key("acme", app="agent") for gw in gws]
            asked = [{"role": "user", "content": "Summarise the incident log. " * 20}]

            async def one(i: int) -> tuple[int, str | None, int]:
                gw = gws[i % 2]
                async with AsyncOpenAI(base_url=gw.base_url, api_key=keys[i % 2],
                                       max_retries=0) as c:
                    try:
                        raw = await c.chat.completions.with_raw_response.create(
                            model=MODEL, messages=asked, max_tokens=16,
                            extra_headers={"x-tokenplane-session": "shared-1"})
                    except openai.RateLimitError as exc:
                        body = exc.body
                        assert isinstance(body, dict)
                        return 0, str(body.get("code")), 0
                    usage = raw.parse().usage
                    assert usage is not None
                    return usage.total_tokens, None, int(raw.headers["x-tokenplane-step"])

            async def all_at_once() -> list[tuple[int, str | None, int]]:
                return await asyncio.gather(*(one(i) for i in range(40)))

            results = asyncio.run(all_at_once())
        finally:
            for gw in gws:
                gw.stop()
    spent = sum(r[0] for r in results)
    admitted = [r for r in results if r[1] is None]
    refused = [r for r in results if r[1] is not None]
    per_step = admitted[0][0]
    assert spent <= CAP  # never over, across both replicas
    assert spent > CAP - per_step  # and the cap is used up, not held back
    assert refused and {r[1] for r in refused} == {"session_budget_exceeded"}
    steps = sorted(r[2] for r in admitted)
    assert len(set(steps)) == len(steps)  # one counter: no step number given twice

