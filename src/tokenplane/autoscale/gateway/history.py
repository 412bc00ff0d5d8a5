"""The forecaster's times of day, learned from the ledger when the controller starts.

The ``tokenplane`` policy forecasts demand one cold start ahead from a time-of-day /
day-of-week profile plus a short-term trend (``autoscale.forecast``). A gateway that
starts would know no profile until it had run for days; the ledger has them. At start
the controller reads ``autoscale.history`` (7 days by default) of per-minute token
sums per alias (uncached prompt tokens and output tokens of every attempt), turns
each minute into the policy's demand units (engine-seconds per second, from the
pool's token costs) and feeds them to the forecaster. Minutes without requests
between the first and the last one count as no demand.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from tokenplane.autoscale.policy import TokenplanePolicy

log = logging.getLogger("tokenplane.autoscale")

# (since, until) -> rows of model, minute, prompt, output (metering.request_history)
ReadDemand = Callable[[float, float], Awaitable[list[dict[str, Any]]]]


def demand_points(rows: list[dict[str, Any]], alias: str,
                  policy: TokenplanePolicy) -> Iterator[tuple[float, float]]:
    """(minute start, demand) for every minute from the alias's first to its last."""
    per_minute = {int(r["minute"]): (float(r["prompt"] or 0), float(r["output"] or 0))
                  for r in rows if r["model"] == alias}
    if not per_minute:
        return
    costs = policy.capacity.costs
    for minute in range(min(per_minute), max(per_minute) + 1):
        prompt, output = per_minute.get(minute, (0.0, 0.0))
        yield minute * 60.0, costs.work(max(0.0, prompt) / 60.0, output / 60.0)


async def learn_history(policies: dict[str, Any], read: ReadDemand, now: float,
                        history_s: float) -> dict[str, int]:
    """Feed each ``tokenplane`` policy's forecaster; points learned per alias."""
    learners = {a: p for a, p in policies.items()
                if isinstance(p, TokenplanePolicy) and p.forecaster is not None}
    if not learners or history_s <= 0:
        return {}
    rows = await read(now - history_s, now)
    out = {}
    for alias, policy in learners.items():
        assert policy.forecaster is not None
        out[alias] = policy.forecaster.learn(demand_points(rows, alias, policy))
        log.info("autoscale %s: the forecaster learned %d minutes of the ledger", alias,
                 out[alias])
    return out
