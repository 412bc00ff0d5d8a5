from __future__ import annotations

from tests.metering.factories import make_event
from tokenplane.metering.reports import usage_report
from tokenplane.metering.retention import RetentionPolicy, prune
from tokenplane.metering.stores.open import open_sink

DAY0 = 1_699_920_000  # 2023-11-14 00:00 UTC


async def test_prune_drops_fine_rollups_but_keeps_totals(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        # ten events on each of ten days
        await sink.write([make_event(i, ts=DAY0 + (i // 10) * 86400 + i) for i in range(100)])
        now = DAY0 + 10 * 86400
        policy = RetentionPolicy(minute_rollups_s=3 * 86400, hour_rollups_s=None, events_s=None)
        deleted = await prune(sink, policy, now)
        assert deleted["rollups_minute"] > 0 and "events" not in deleted
        minutes = await sink.fetch(
            "SELECT MIN(bucket) AS b FROM usage_rollups WHERE grain = 'minute'"
        )
        assert minutes[0]["b"] >= now - 3 * 86400
        assert sum(r["requests"] for r in await usage_report(sink, ["tenant"])) == 100
        assert (await prune(sink, policy, now))["rollups_minute"] == 0
        gone = await prune(sink, RetentionPolicy(None, None, None, events_s=5 * 86400), now)
        assert gone == {"events": 50}
    finally:
        await sink.close()


async def test_prune_drops_idle_session_rollups(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        await sink.write([make_event(i, session_id=f"s{i}", session_step=1,
                                     ts=DAY0 + i * 86400) for i in range(4)])
        policy = RetentionPolicy(None, None, None, sessions_idle_s=2 * 86400)
        assert await prune(sink, policy, DAY0 + 4 * 86400) == {"sessions": 2}
        left = await sink.fetch("SELECT session_id FROM session_rollups ORDER BY session_id")
        assert [r["session_id"] for r in left] == ["s2", "s3"]
    finally:
        await sink.close()
