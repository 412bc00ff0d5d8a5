"""A young ledger's advice says what it checked and what it lacks (issue 31): no
findings is not silence: the table, the JSON document and the console's Advice page
name the rules' data needs, the groups short of them and when, at their pace, they
will have enough."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

from typer.testing import CliRunner

from tests.advice.ledgers import BOOK, Ledger
from tokenplane.advice.coverage import coverage, explain
from tokenplane.advice.model import Aggregate, Thresholds, Window
from tokenplane.cli.main import build_cli
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.open import open_sink

DAY = 86400.0


def test_a_young_ledger_says_what_it_lacks_and_when_it_has_enough(tmp_path: Path) -> None:
    now = time.time()
    led = Ledger()
    for i in range(5):  # five requests in the last hours: a rule needs 20 per group
        ts = now - 600 - i * 60
        ev = UsageEvent(f"young-{i}", 0, ts, tenant="acme", app="chat", key_id="k",
                        model="big", arrival_ts=ts - 1, upstream_start_ts=ts - 0.9,
                        input_system=200, input_user=100, input_tokens=300, output_tokens=50,
                        finish_reason="stop", system_fingerprint="fp")
        BOOK.price(ev)
        led.events.append(ev)

    async def write() -> None:
        sink = await open_sink(tmp_path / "ledger.db")
        try:
            await led.write(sink)
        finally:
            await sink.close()

    asyncio.run(write())
    runner = CliRunner()
    out = runner.invoke(build_cli(), ["advise", "--home", str(tmp_path)])
    assert out.exit_code == 0, out.output
    text = out.stdout
    assert ": 0 findings," in text
    assert "checked 5 requests in 1 groups (tenant/app/model); 0 have enough data" in text
    assert "at least 20 requests and reports a saving only from 10,000 tokens a month" in text
    short = re.search(r"lacking data: 1 groups have fewer than 20 requests; the busiest, "
                      r"acme/chat on big, has 5; at its pace it has enough around "
                      r"(\d{4}-\d\d-\d\d \d\d:\d\d UTC) \(in (\d+) days?( \d+ h)?\)", text)
    assert short is not None, text
    assert "right-sizing: 0 feedback scores so far" in text
    doc = json.loads(runner.invoke(build_cli(), ["advise", "--home", str(tmp_path),
                                                 "--format", "json"]).stdout)
    cov = doc["coverage"]
    assert (cov["requests"], cov["groups"], cov["groups_with_enough"]) == (5, 1, 0)
    # at 5 requests in at most two days, 15 more take at least 3 days
    assert cov["short"]["enough_at"] >= now + 3 * DAY - 120


def test_coverage_of_groups_with_enough() -> None:
    window = Window(0.0, 10 * DAY)
    rows = [Aggregate(tenant="a", app="x", model="m", requests=40),
            Aggregate(tenant="a", app="y", model="m", requests=4),
            Aggregate(tenant="a", app="y", model="m", version="v2", requests=6)]
    cov = coverage(rows, [], window, Thresholds(), 10 * DAY)
    assert (cov["groups"], cov["groups_with_enough"]) == (2, 1)
    # a/y has 10 requests in 10 days: one a day, 10 more take 10 days
    assert cov["short"]["requests"] == 10 and cov["short"]["enough_in"] == "10 days"
    assert cov["short"]["enough_at"] == 20 * DAY
    lines = explain(cov)
    assert lines[0] == "checked 50 requests in 2 groups (tenant/app/model); 1 have enough data"
    full = coverage(rows[:1], [], window, Thresholds(), 10 * DAY)
    assert full["short"] is None
    assert not any(ln.startswith("lacking data") for ln in explain(full))
