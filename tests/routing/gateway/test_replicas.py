"""The gateway's live view fills every snapshot field: prices and measured prefill."""

from __future__ import annotations

import asyncio

import pytest

from tokenplane.compose.config_file import validate_config
from tokenplane.compose.endpoints import backend_endpoints
from tokenplane.compose.routing import build_live
from tokenplane.engine.profiles import get_profile
from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.route_stage import RequestRouting
from tokenplane.pipeline.schedule_stage import RoutingFinisher
from tokenplane.routing.gateway.router import GatewayRouter
from tokenplane.routing.snapshot import DEFAULT_PREFILL_S_PER_TOKEN
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.tokens.predictor import LengthPredictor
from tokenplane.upstream.pool import Endpoint, Pool


class NoTransport:
    async def send(self, req: object) -> object:
        raise AssertionError("nothing is sent")

    async def close(self) -> None:
        return None


CONFIG = {
    "models": [
        {"alias": "m", "tokenizer": "estimate", "prices": {"input": "0.50", "output": "1.50"},
         "backends": [{"id": "a", "type": "vllm", "base_url": "http://127.0.0.1:1"},
                      {"id": "b", "type": "vllm", "base_url": "http://127.0.0.1:2"}]},
        {"alias": "local", "tokenizer": "estimate",
         "backends": [{"type": "sim", "profile": "llama3-8b-h100"}]},
    ],
    "routing": {"scrape_interval_s": 0},
}


def _pools() -> tuple[object, dict[str, Pool]]:
    config = validate_config(CONFIG)
    counters = ModelCounters(config.models)
    pools: dict[str, Pool] = {}
    for m in config.models:
        pool = Pool(m)
        for i, b in enumerate(m.backends):
            if b.type == "sim":
                pool.endpoints.extend(backend_endpoints(m, b, i, counters, []))
            else:
                pool.endpoints.append(
                    Endpoint(b.id or "", b, NoTransport(), m.alias)  # type: ignore[arg-type]
                )
        pools[m.alias] = pool
    return config, pools


def test_cost_and_prefill_rate_are_filled() -> None:
    config, pools = _pools()
    live = build_live(config, pools)  # type: ignore[arg-type]
    a = live.by_id["a"].snapshot(0.0)
    assert a.cost_per_token == pytest.approx(1e-6)  # (0.50 + 1.50) / 2 per 1M tokens
    assert a.prefill_s_per_token == DEFAULT_PREFILL_S_PER_TOKEN  # nothing measured yet
    (sim,) = live.of("local")
    s = sim.snapshot(0.0)
    assert s.cost_per_token == 0.0  # no prices configured: free
    # an in-process engine starts from its profile's prefill time per token
    assert s.prefill_s_per_token == get_profile("llama3-8b-h100").a_s_per_token


def test_streamed_ttft_measures_the_replicas_prefill_time() -> None:
    config, pools = _pools()
    live = build_live(config, pools)  # type: ignore[arg-type]
    router = GatewayRouter(config.routing, live, {})  # type: ignore[attr-defined]
    routing = RequestRouting(router, pools, LengthPredictor())
    finisher = RoutingFinisher(routing, None, lambda m, t: 0)
    ep_a = live.by_id["a"].endpoint
    ep_a.prompt_tokens_in_flight = 1000  # prefill queued ahead of the request on a

    ctx = RequestContext("r1", CHAT.path, CHAT, b"", {}, alias="m", stream=True)
    ctx.counts.user = 3000
    routing.info(ctx)
    routing.bind(ctx, "m", ep_a)
    assert routing.info(ctx).ahead == 1000
    ctx.upstream_start, ctx.first_token = 100.0, 100.4  # 0.4 s for 1,000 + 3,000 tokens
    asyncio.run(finisher.finish(ctx))
    measured = live.by_id["a"].snapshot(0.0).prefill_s_per_token
    assert measured == pytest.approx((DEFAULT_PREFILL_S_PER_TOKEN + 1e-4) / 2)
    assert live.by_id["b"].snapshot(0.0).prefill_s_per_token == DEFAULT_PREFILL_S_PER_TOKEN
    assert ep_a.prompt_tokens_in_flight == 1000  # its own load was given back

    # a non-streamed answer has no first token: nothing is measured
    ctx2 = RequestContext("r2", CHAT.path, CHAT, b"", {}, alias="m")
    ctx2.counts.user = 3000
    routing.info(ctx2)
    routing.bind(ctx2, "m", ep_a)
    ctx2.upstream_start = 200.0
    asyncio.run(finisher.finish(ctx2))
    assert live.by_id["a"].snapshot(0.0).prefill_s_per_token == measured
