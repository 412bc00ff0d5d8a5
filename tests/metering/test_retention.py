from __future__ import annotations

from tests.metering.factories import make_event
from tokenplane.metering.feedback import FeedbackRecord, feedback_sums, record_feedback
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


async def test_prune_drops_old_advice_days_and_feedback(sink_target: str) -> None:
    """The advisor's day rollups go by whole days and feedback by its request's time;
    the advisor's sums of the days kept are untouched."""
    sink = await open_sink(sink_target)
    try:
        # one event at noon on each of six days, and a score of each
        events = [make_event(i, ts=DAY0 + i * 86400 + 43200) for i in range(6)]
        await sink.write(events)
        for ev in events:
            await record_feedback(sink, FeedbackRecord(
                ev.tenant, ev.request_id, ev.app, ev.model, "", "k", 1.0, None, (),
                ev.ts, ev.ts + 60))
        now = DAY0 + 6 * 86400 + 3600  # early on day 6
        # 3.5 days back is 13:00 on day 2: day 2's rollup (whole days only) stays;
        # 3.5 days and an hour back is day 2's noon, its score's time, and a score is
        # dropped only when older than its cut-off
        policy = RetentionPolicy(None, None, None, advice_rollups_s=3.5 * 86400,
                                 feedback_s=3.5 * 86400 + 3600)
        assert await prune(sink, policy, now) == {"advice_rollups": 2, "feedback": 2}
        days = await sink.fetch("SELECT bucket, requests FROM advice_rollups ORDER BY bucket")
        assert [(r["bucket"], r["requests"]) for r in days] == [
            (DAY0 + d * 86400, 1) for d in range(2, 6)]
        left = await feedback_sums(sink, None, None, None)
        assert sum(r["n"] for r in left) == 4
        assert await prune(sink, policy, now) == {"advice_rollups": 0, "feedback": 0}
    finally:
        await sink.close()


async def test_prune_drops_old_client_days(sink_target: str) -> None:
    """The day rollups by API and client go by whole days, like the advisor's."""
    sink = await open_sink(sink_target)
    try:
        await sink.write([make_event(i, ts=DAY0 + i * 86400 + 43200, client="claude-cli",
                                     operation="messages") for i in range(5)])
        now = DAY0 + 5 * 86400 + 3600
        policy = RetentionPolicy(None, None, None, client_rollups_s=2.5 * 86400)
        assert await prune(sink, policy, now) == {"client_rollups": 2}
        days = await sink.fetch("SELECT bucket FROM client_rollups ORDER BY bucket")
        assert [r["bucket"] for r in days] == [DAY0 + d * 86400 for d in range(2, 5)]
        assert await prune(sink, policy, now) == {"client_rollups": 0}
    finally:
        await sink.close()
