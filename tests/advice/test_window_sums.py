"""The window's sums as the database computes them (``advice_rows``, three per-day
sums, the rest derived) equal the advisor's definitions applied day row by day row
in Python (docs/ADVICE.md: per day and template, the first request's system tokens
write a cache and the rest repeat; the earlier and later half of the data's days), on
a ledger with several tenants, templates, versions and days, on both backends; and
each fixture's findings are those of the same rows summed in Python."""

from __future__ import annotations

import random
from dataclasses import asdict
from typing import Any

from tests.advice import ledgers
from tests.advice.ledgers import DAY, NOW, Ledger
from tokenplane.advice.advisor import advise
from tokenplane.advice.gateway.source import (
    advice_rows,
    data_days,
    rates_of,
    to_aggregate,
)
from tokenplane.advice.model import Aggregate, Window
from tokenplane.metering.advice_rollups import ADVICE_MEASURES
from tokenplane.metering.stores.open import open_sink

GROUP = ("tenant", "app", "model", "version", "template", "currency")


def _mixed() -> Ledger:
    rng = random.Random(7)
    led = Ledger()
    for tenant in ("acme", "globex"):
        for app, model in (("chat", "big"), ("mail", "small"), ("chat", "small")):
            for fp in ("fp-a", "fp-b", ""):
                led.add(rng.randrange(20, 60), tenant=tenant, app=app, model=model,
                        days=rng.randrange(1, 9), system=rng.randrange(0, 900),
                        history=rng.randrange(0, 700),
                        output=lambda i: 40 + (i * 37) % 300,
                        system_fingerprint=fp or None,
                        model_version=rng.choice(["v1", "v2", ""]))
    return led


def _reference(days: list[dict[str, Any]], first: int, last: int) -> dict[tuple[Any, ...],
                                                                          dict[str, int]]:
    """The sums per group from the day rows, by the per-day definitions."""
    mid = first + ((last - first) // DAY + 1) // 2 * DAY
    out: dict[tuple[Any, ...], dict[str, int]] = {}
    for d in days:
        acc = out.setdefault(tuple(d[k] for k in GROUP), dict.fromkeys(
            (*ADVICE_MEASURES, "prefix_repeat_tokens", "prefix_write_tokens",
             "early_requests", "early_history", "late_requests", "late_history"), 0))
        for m in ADVICE_MEASURES:
            acc[m] += int(d[m])
        system, requests = int(d["input_system"]), int(d["requests"])
        if d["template"] != "" and requests > 0:
            acc["prefix_write_tokens"] += system // requests
            acc["prefix_repeat_tokens"] += system - system // requests
        half = "early" if int(d["bucket"]) < mid else "late"
        acc[f"{half}_requests"] += requests
        acc[f"{half}_history"] += int(d["input_history"])
    return out


async def test_the_databases_sums_are_the_per_day_definitions(sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        await _mixed().write(sink)
        lo, hi = NOW - 30 * DAY, NOW
        for tenant in (None, "acme"):
            days = await data_days(sink, lo, hi, tenant)
            assert days is not None and days[1] - days[0] >= 5 * DAY
            got = {tuple(getattr(a, k) for k in GROUP): a
                   for a in map(to_aggregate, await advice_rows(sink, lo, hi, tenant, days))}
            where = "" if tenant is None else f" WHERE tenant = '{tenant}'"
            day_rows = await sink.fetch(f"SELECT * FROM advice_rollups{where}")
            want = _reference(day_rows, *days)
            assert set(got) == set(want) and len(want) >= 9
            for key, sums in want.items():
                row = asdict(got[key])
                assert {k: row[k] for k in sums} == sums, key
            assert any(a.prefix_repeat_tokens > 0 for a in got.values())
            assert any(a.early_requests and a.late_requests for a in got.values())
    finally:
        await sink.close()


async def test_each_fixtures_findings_are_those_of_the_reference_sums(
        sink_target: str) -> None:
    sink = await open_sink(sink_target)
    try:
        for name, build in sorted(ledgers.FIXTURES.items()):
            await sink.execute("DELETE FROM advice_rollups")
            events = build().events
            for ev in events:  # new events, so the sink sums them into the rollups
                ev.request_id = f"{name}-{ev.request_id}"
            await sink.write(events)
            lo, hi = NOW - 30 * DAY, NOW
            days = await data_days(sink, lo, hi, None)
            assert days is not None
            window = Window(float(days[0]), hi)
            rates = rates_of(ledgers.BOOK)
            ours = advise([to_aggregate(r) for r in await advice_rows(sink, lo, hi, None, days)],
                          [], rates, window)
            day_rows = await sink.fetch("SELECT * FROM advice_rollups")
            ref = [Aggregate(**dict(zip(GROUP, key, strict=True)), **sums)
                   for key, sums in _reference(day_rows, *days).items()]
            theirs = advise(ref, [], rates, window)
            assert [f.as_dict() for f in ours.findings] == \
                [f.as_dict() for f in theirs.findings], name
            assert ours.findings or name == "right_sizing", name  # it needs feedback
    finally:
        await sink.close()
