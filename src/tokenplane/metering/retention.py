"""Retention: drop fine-grained rollups and raw events past their useful age.

Coarser rollups keep the totals: pruning minute rollups older than a week leaves the
hour and day rollups (and every report aligned to hours or days) intact. Raw events
are the audit trail; prune them only past the period a journal could still replay
(a replayed event whose row was pruned would be inserted, and counted, again).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.metering.day_sums import DAY_S
from tokenplane.metering.rollups import GRAINS
from tokenplane.metering.stores.base import LedgerSink


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Ages in seconds; ``None`` keeps forever."""

    minute_rollups_s: float | None = 7 * 86400
    hour_rollups_s: float | None = 90 * 86400
    day_rollups_s: float | None = None
    events_s: float | None = None
    fingerprints_idle_s: float | None = None  # drop fingerprints not seen for this long
    sessions_idle_s: float | None = None  # drop session rollups idle for this long
    advice_rollups_s: float | None = None  # the advisor's day rollups (whole days)
    feedback_s: float | None = None  # feedback scores, by the scored request's time
    client_rollups_s: float | None = None  # the day rollups by API and client (whole days)


async def prune(sink: LedgerSink, policy: RetentionPolicy, now: float) -> dict[str, int]:
    """Apply ``policy`` as of ``now`` (epoch seconds); returns rows deleted per table."""
    deleted: dict[str, int] = {}
    ages = {
        "minute": policy.minute_rollups_s,
        "hour": policy.hour_rollups_s,
        "day": policy.day_rollups_s,
    }
    for grain, age in ages.items():
        if age is None:
            continue
        # only whole buckets that ended before the cut-off
        cutoff = (int(now - age) // GRAINS[grain]) * GRAINS[grain]
        deleted[f"rollups_{grain}"] = await sink.execute(
            "DELETE FROM usage_rollups WHERE grain = ? AND bucket < ?", [grain, cutoff]
        )
    if policy.events_s is not None:
        deleted["events"] = await sink.execute(
            "DELETE FROM usage_events WHERE ts < ?", [now - policy.events_s]
        )
    if policy.fingerprints_idle_s is not None:
        deleted["fingerprints"] = await sink.execute(
            "DELETE FROM system_fingerprints WHERE last_ts < ?",
            [now - policy.fingerprints_idle_s],
        )
    if policy.sessions_idle_s is not None:
        deleted["sessions"] = await sink.execute(
            "DELETE FROM session_rollups WHERE last_ts < ?", [now - policy.sessions_idle_s])
    if policy.advice_rollups_s is not None:
        cutoff = (int(now - policy.advice_rollups_s) // DAY_S) * DAY_S
        deleted["advice_rollups"] = await sink.execute(
            "DELETE FROM advice_rollups WHERE bucket < ?", [cutoff])
    if policy.client_rollups_s is not None:
        cutoff = (int(now - policy.client_rollups_s) // DAY_S) * DAY_S
        deleted["client_rollups"] = await sink.execute(
            "DELETE FROM client_rollups WHERE bucket < ?", [cutoff])
    if policy.feedback_s is not None:
        deleted["feedback"] = await sink.execute(
            "DELETE FROM feedback WHERE request_ts < ?", [now - policy.feedback_s])
    return deleted
