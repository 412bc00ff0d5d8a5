"""The forecaster learns its times of day from the ledger at start: the per-minute
token sums a gateway recorded, read back from its real ledger (SQLite here)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import openai
import pytest

from tests.autoscale.gateway.test_embedded import MSGS, autoscaled
from tests.gateway.harness import GatewayThread
from tests.services import fresh_pg_schema
from tokenplane.autoscale.capacity import CapacityEstimator, flat_costs
from tokenplane.autoscale.forecast import DemandForecaster
from tokenplane.autoscale.gateway.history import demand_points, learn_history
from tokenplane.autoscale.policy import TokenplanePolicy
from tokenplane.autoscale.spec import PoolPolicySpec
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.request_history import demand_by_minute
from tokenplane.metering.stores.open import open_sink


def _policy() -> TokenplanePolicy:
    return TokenplanePolicy(PoolPolicySpec(), CapacityEstimator(flat_costs(100.0)),
                            DemandForecaster())


def test_minutes_between_requests_count_as_no_demand() -> None:
    rows = [{"model": "chat", "minute": 10, "prompt": 600, "output": 1200},
            {"model": "other", "minute": 11, "prompt": 60, "output": 60},
            {"model": "chat", "minute": 12, "prompt": 0, "output": 600}]
    points = list(demand_points(rows, "chat", _policy()))
    # 100 tokens/s of capacity: (600 + 1200) / 60 s = 30 tokens/s = 0.3 of a replica
    assert points == [(600.0, pytest.approx(0.3)), (660.0, 0.0), (720.0, pytest.approx(0.1))]


def test_the_forecaster_learns_the_ledger(tmp_path: Path) -> None:
    cfg = autoscaled()
    del cfg["autoscale"]  # a gateway that ran before autoscaling was turned on
    gw = GatewayThread(cfg, tmp_path / "gw").start()
    try:
        c = openai.OpenAI(base_url=gw.base_url, api_key=gw.create_key("default"),
                          max_retries=0, timeout=60)
        for _ in range(3):
            c.chat.completions.create(model="chat", messages=MSGS, max_tokens=32)
    finally:
        gw.stop()
    now = time.time()

    async def learn() -> tuple[dict[str, int], TokenplanePolicy]:
        sink = await open_sink(gw.home / "ledger.db")
        try:
            policy = _policy()
            learned = await learn_history({"chat": policy},
                                          lambda a, b: demand_by_minute(sink, a, b),
                                          now, 7 * 86400.0)
            return learned, policy
        finally:
            await sink.close()

    learned, policy = asyncio.run(learn())
    assert learned["chat"] >= 1
    assert policy.forecaster is not None
    seen = policy.forecaster.profile(now)
    assert seen is not None and seen > 0  # this time of day had demand


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_demand_by_minute_reads_either_ledger(store: str, tmp_path: Path) -> None:
    """The same per-minute sums from SQLite and PostgreSQL (integer minutes both)."""
    events = [UsageEvent("a", 0, 120.5, model="chat", input_tokens=100,
                         cached_input_tokens=40, output_tokens=10),
              UsageEvent("b", 0, 179.9, model="chat", input_tokens=50, output_tokens=5),
              UsageEvent("c", 0, 180.0, model="chat", input_tokens=7, output_tokens=1),
              UsageEvent("d", 0, 150.0, model="other", input_tokens=1, output_tokens=1)]

    async def read(target: str) -> list[dict[str, object]]:
        sink = await open_sink(target)
        try:
            await sink.write(events)
            return await demand_by_minute(sink, 0.0, 1000.0)
        finally:
            await sink.close()

    if store == "sqlite":
        rows = asyncio.run(read(str(tmp_path / "ledger.db")))
    else:
        with fresh_pg_schema("demand") as dsn:
            rows = asyncio.run(read(dsn))
    got = {(r["model"], int(str(r["minute"]))): (int(str(r["prompt"])), int(str(r["output"])))
           for r in rows}
    assert got == {("chat", 2): (110, 15), ("chat", 3): (7, 1), ("other", 2): (1, 1)}
