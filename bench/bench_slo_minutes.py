"""What a restart of the SLO evaluation costs, with and without the sealed minutes
(issue 14: evaluation that scales with the window).

Writes ``--days`` of traffic at ``--rps`` into a real SQLite ledger through the sink
(one request every 1/rps seconds; 3% fail, 5% slow), then times a fresh evaluation's
first round three ways: reading every raw row of the window (no sealed minutes, what
every rebuild did before), the first round that seals the window's minutes, and a
restart that loads the sealed minutes and reads raw rows only since the last one.

Usage: python bench/bench_slo_minutes.py [--days 2] [--rps 2] [--window-days 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.open import open_sink
from tokenplane.slo.gateway.minutes_store import MinuteStore
from tokenplane.slo.gateway.service import SloService
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules

T0 = 1_790_000_000.0


def events(days: float, rps: float) -> list[UsageEvent]:
    out = []
    n = int(days * 86400 * rps)
    for i in range(n):
        ts = T0 + i / rps
        ok = i % 33 != 0
        slow = i % 20 == 0
        ttft = 2.0 if slow else 0.3
        out.append(UsageEvent(
            request_id=f"r{i}", attempt=0, ts=ts, tenant=f"t{i % 5}", model="chat",
            status="ok" if ok else "error", http_status=200 if ok else 502, stream=True,
            error_code=None if ok else "upstream_error", arrival_ts=ts - ttft - 0.5,
            upstream_start_ts=ts - ttft - 0.4, first_token_ts=ts - 0.5 if ok else None,
            last_token_ts=ts if ok else None, output_tokens=10 if ok else 0))
    return out


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=float, default=2.0)
    ap.add_argument("--rps", type=float, default=2.0)
    ap.add_argument("--window-days", type=float, default=2.0)
    args = ap.parse_args()
    window = args.window_days * 86400
    slo = Slo("chat", Selector(model="chat"),
              (Sli(SliKind.AVAILABILITY), Sli(SliKind.TTFT, 1.0)), 0.99, window,
              default_rules(window, 0.99))
    with tempfile.TemporaryDirectory() as tmp:
        sink = await open_sink(Path(tmp) / "ledger.db")
        evs = events(args.days, args.rps)
        t = time.perf_counter()
        for i in range(0, len(evs), 5000):
            await sink.write(evs[i:i + 5000])
        write_s = time.perf_counter() - t
        now = T0 + args.days * 86400 + 30
        result: dict[str, object] = {"events": len(evs), "days": args.days, "rps": args.rps,
                                     "window_days": args.window_days,
                                     "write_s": round(write_s, 1)}
        for label, minutes in (("raw_window", False), ("first_with_sealing", True),
                               ("restart_from_minutes", True)):
            svc = SloService([slo], lambda: sink, clock=lambda: now,
                             minutes=MinuteStore(lambda: sink) if minutes else None)
            t = time.perf_counter()
            await svc.refresh()
            took = time.perf_counter() - t
            status = [s.as_dict() for s in svc.status(now)]
            result[label] = {"seconds": round(took, 2),
                             "raw_rows_from_hours_ago": round((now - (svc.raw_from or now))
                                                              / 3600, 2),
                             "valid": [s["valid"] for s in status],
                             "bad": [s["bad"] for s in status]}
        await sink.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
