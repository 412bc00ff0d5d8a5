"""The optimisation advisor on a ledger of a million events, and what its rollup costs
the ledger's writes.

1. Fills a SQLite ledger (and with ``--pg DSN`` a PostgreSQL one) with ``--events``
   events over 30 days through the real sink (batches of 10,000): 40 tenants x 8 apps x
   3 aliases x 2 versions x 3 templates, so ``advice_rollups`` holds what a busy month
   holds. Then times ``gather_advice`` (what ``GET /admin/v1/advice`` and ``tokenplane
   advise`` run) for every tenant and for one tenant, ``--runs`` times each.
2. Writes ``--write-events`` events in flusher-sized batches (1,000) into fresh
   ledgers with and without the advice rollup upsert, alternating, and reports events/s.

    python bench/bench_advice.py [--events 1000000] [--runs 20] [--write-events 100000]
                                 [--pg DSN] [--ledger FILE] [--end-now]

``--ledger FILE`` keeps the SQLite ledger there (filled once, reused after), so another
tree's advisor (``PYTHONPATH=<tree>/src``) can be timed on the same rows (a reused
ledger's window ends just after its last event); ``--end-now`` makes the events' 30
days end now rather than on 2026-05-28, so that a gateway serving the ledger
(``bench_console.py --keep DIR`` with ``DIR/ledger.db``) shows them;
``--write-events 0`` skips part 2.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from tokenplane.advice.gateway.source import gather_advice
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.pricing import PriceBook
from tokenplane.metering.stores import sqlite as sqlite_store
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import open_sink

DAY = 86400
NOW = 1_780_000_000.0
BOOK = PriceBook({"currency": "USD", "models": {
    "large": {"input": "2.50", "cached_input": "1.25", "cache_write": "3.125", "output": "10"},
    "medium": {"input": "0.60", "cached_input": "0.30", "output": "2.40"},
    "small": {"input": "0.15", "cached_input": "0.075", "output": "0.60"},
}})


def make_events(n: int, seed: int, prefix: str, end: float = NOW) -> list[UsageEvent]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        tenant = rng.randrange(40)
        app = rng.randrange(8)
        model = ("large", "medium", "small")[rng.randrange(3)]
        template = rng.randrange(3)
        system = 200 + 150 * template + 40 * app
        history = rng.randrange(0, 1500)
        output = max(1, int(rng.gauss(150 + 40 * app, 60)))
        ts = end - 30 * DAY + (i + 0.5) * 30 * DAY / n
        ev = UsageEvent(
            f"{prefix}-{i}", 0, ts, tenant=f"t{tenant}", department="d", app=f"app{app}",
            key_id=f"k{tenant}-{app}", model=model, arrival_ts=ts - 1,
            upstream_start_ts=ts - 0.9, input_system=system, input_history=history,
            input_user=80, input_tokens=system + history + 80,
            cached_input_tokens=system if template == 0 else 0, output_tokens=output,
            model_version=f"v{rng.randrange(2)}", system_fingerprint=f"fp{app}-{template}",
            finish_reason="length" if rng.random() < 0.03 * (app % 4) else "stop",
            status="ok" if rng.random() > 0.01 else "error")
        BOOK.price(ev)
        out.append(ev)
    return out


async def fill(sink: LedgerSink, total: int, end: float = NOW) -> float:
    await sink.record_price_table(BOOK.version, BOOK.currency, orjson.dumps(BOOK.table()))
    t0 = time.perf_counter()
    step = 10_000
    for start in range(0, total, step):
        await sink.write(make_events(min(step, total - start), start, f"e{start}", end))
    return time.perf_counter() - t0


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def time_advice(sink: LedgerSink, runs: int, tenant: str | None,
                      end: float = NOW) -> dict[str, Any]:
    times = []
    doc: dict[str, Any] = {}
    for _ in range(runs):
        t0 = time.perf_counter()
        doc = await gather_advice(sink, since=end - 30 * DAY, now=end, tenant=tenant)
        times.append((time.perf_counter() - t0) * 1000)
    kinds: dict[str, int] = {}
    for f in doc["findings"]:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    return {"tenant": tenant, "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(_pct(times, 0.95), 1), "max_ms": round(max(times), 1),
            "findings": len(doc["findings"]), "kinds": kinds}


async def ledger_case(target: str, events: int, runs: int,
                      end: float = NOW) -> dict[str, Any]:
    sink = await open_sink(target)
    try:
        filled = (await sink.fetch("SELECT MAX(ts) AS ts FROM usage_events"))[0]["ts"]
        fill_s = await fill(sink, events, end) if filled is None else 0.0
        end = end if filled is None else float(filled) + 1  # just after the last event
        rows = (await sink.fetch("SELECT COUNT(*) AS n FROM advice_rollups"))[0]["n"]
        return {"events": events, "fill_s": round(fill_s, 1), "advice_rollup_rows": int(rows),
                "all_tenants": await time_advice(sink, runs, None, end),
                "one_tenant": await time_advice(sink, runs, "t7", end)}
    finally:
        await sink.close()


async def write_rate(path: Path, events: list[UsageEvent], advice: bool) -> float:
    original = sqlite_store.advice_rows
    if not advice:
        sqlite_store.advice_rows = lambda _events: []  # type: ignore[assignment]
    try:
        sink = await open_sink(path)
        t0 = time.perf_counter()
        for start in range(0, len(events), 1000):
            await sink.write(events[start:start + 1000])
        elapsed = time.perf_counter() - t0
        await sink.close()
    finally:
        sqlite_store.advice_rows = original
    return len(events) / elapsed


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--write-events", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pg", default=None)
    ap.add_argument("--ledger", default=None, help="Keep (or reuse) the SQLite ledger here.")
    ap.add_argument("--end-now", action="store_true",
                    help="The events' 30 days end now (not 2026-05-28), so a gateway serving "
                         "the ledger (bench_console.py --keep) shows them.")
    args = ap.parse_args()
    end = time.time() - 60 if args.end_now else NOW
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out["sqlite"] = await ledger_case(args.ledger or str(Path(tmp) / "big.db"),
                                          args.events, args.runs, end)
        if args.pg:
            out["postgres"] = await ledger_case(args.pg, args.events, args.runs)
        events = make_events(args.write_events, 99, "w")
        rates: dict[str, list[float]] = {"with_advice": [], "without_advice": []}
        for r in range(args.rounds if events else 0):
            for advice in (r % 2 == 0, r % 2 != 0):
                path = Path(tmp) / f"w{r}-{advice}.db"
                key = "with_advice" if advice else "without_advice"
                rates[key].append(await write_rate(path, events, advice))
        if events:
            out["sqlite_writes_events_per_s"] = {k: [round(x) for x in v]
                                                 for k, v in rates.items()}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    asyncio.run(main())
