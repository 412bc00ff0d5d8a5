"""The console's rollup queries on both ledgers (SQLite and PostgreSQL): the same sums
from the same events, grouped and filtered as the pages ask."""

from __future__ import annotations

from tests.metering.factories import make_event
from tokenplane.console.queries import Filter, clients, usage, versions
from tokenplane.metering.stores.open import open_sink

T0 = 1_700_000_000 // 86400 * 86400


async def test_usage_and_version_sums_on_both_ledgers(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        timed = {"arrival_ts": T0 + 10.0, "upstream_start_ts": T0 + 10.1,
                 "first_token_ts": T0 + 10.3, "last_token_ts": T0 + 10.9}
        await sink.write([
            make_event(i, ts=T0 + 11.0 + i, tenant="acme" if i % 2 else "globex",
                       department="research" if i % 4 == 1 else "", app=f"app{i % 3}",
                       model_version="v1" if i % 5 else "v2", cost_micros=100 + i, **timed)
            for i in range(40)
        ])
        day = Filter("day", T0, T0 + 86400, "acme")
        by_dept = {r["department"]: r for r in await usage(sink, day, ["department", "currency"])}
        assert {k: v["requests"] for k, v in by_dept.items()} == {"": 10, "research": 10}
        assert by_dept["research"]["output_tokens"] == 70
        assert by_dept["research"]["cost_micros"] == sum(100 + i for i in range(40) if i % 4 == 1)
        apps = await usage(sink, Filter("hour", T0, None, "acme", "research"), ["app"])
        assert sum(r["requests"] for r in apps) == 10
        minutes = await usage(sink, Filter("minute", T0, T0 + 3600), ["bucket"])
        assert sum(r["requests"] for r in minutes) == 40
        vs = {r["model_version"]: r for r in await versions(
            sink, Filter("day", T0, None, None), ["model", "model_version"])}
        assert {k: v["requests"] for k, v in vs.items()} == {"v1": 32, "v2": 8}
        assert vs["v1"]["timed"] == 32 and vs["v1"]["ttft_us"] == 32 * 200_000
        assert vs["v2"]["decode_us"] == 8 * 600_000
    finally:
        await sink.close()


async def test_sums_by_api_and_client_follow_the_drill_down(sink_target: str) -> None:
    """A department has no column in the day rollups by client: its rows are its apps';
    an hour-grain bound counts from the start of its day."""
    sink = await open_sink(sink_target)
    try:
        await sink.write([
            make_event(i, ts=T0 + 3600 * (i % 20), tenant="acme",
                       department="research" if i % 3 == 0 else "ops", app=f"app{i % 3}",
                       operation="messages" if i % 2 else "chat",
                       client="claude-cli" if i % 2 else "openai-python")
            for i in range(30)
        ] + [make_event(100, ts=T0 - 60, tenant="acme", app="app0")])  # the day before
        everything = await clients(sink, Filter("day", T0, None, "acme"))
        assert {(r["api"], r["client"]): r["requests"] for r in everything} == {
            ("Anthropic Messages", "claude-cli"): 15, ("OpenAI Chat", "openai-python"): 15}
        research = await clients(sink, Filter("hour", T0 + 7200, None, "acme", "research"))
        assert sum(r["requests"] for r in research) == 10  # app0, the whole day
        assert {r["client"] for r in research} == {"claude-cli", "openai-python"}
        one = await clients(sink, Filter("day", T0, None, "acme", "ops", "app1"))
        assert sum(r["requests"] for r in one) == 10
        assert await clients(sink, Filter("day", T0, None, "acme", "nobody")) == []
        assert await clients(sink, Filter("day", T0, None, "globex")) == []
    finally:
        await sink.close()
