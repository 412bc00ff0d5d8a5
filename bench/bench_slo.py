"""What SLOs cost: the request path's share (the live counters' finisher) and the
evaluation off it.

* ``record``: ``SloCounters.record`` per finished request with 0, 3 and 10 SLOs of
  two SLIs each configured, against a request's facts built alone (the finisher's
  whole work is building the facts and recording them).
* ``status``: one evaluation round (every SLO's SLIs over a 30-day window of one-minute
  buckets, burn over each alert window, alerts) with 30 days of buckets filled.
* ``feed``: rows per second through ``LedgerFeed`` into the evaluator (what a
  gateway's refresh or a restart's first read does per row read from the ledger).

Prints one JSON document. CPU time (``time.process_time``), best of ``--rounds``.
Usage: python bench/bench_slo.py [--n 200000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from tokenplane.slo.evaluator import SloEvaluator
from tokenplane.slo.feed import LedgerFeed
from tokenplane.slo.live import SloCounters
from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules
from tokenplane.slo.verdict import RequestFacts

WINDOW = 30 * 86400.0


def slos(n: int) -> list[Slo]:
    return [Slo(f"slo{i}", Selector(tenant=f"t{i % 4}", slo_class="interactive"),
                (Sli(SliKind.TTFT, 1.0), Sli(SliKind.AVAILABILITY)), 0.99, WINDOW,
                default_rules(WINDOW, 0.99)) for i in range(n)]


def facts(i: int, ts: float) -> RequestFacts:
    return RequestFacts(ts=ts, model="chat", tenant=f"t{i % 4}", department="", app="",
                        slo_class="interactive", status="ok", http_status=200,
                        error_code=None, stream=True, ttft_s=0.3 + (i % 10) * 0.1,
                        tpot_s=0.02, latency_s=2.0)


def best(rounds: int, fn: Callable[[], None]) -> float:
    out = []
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return min(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    n = args.n
    result: dict[str, object] = {"n": n}
    base = best(args.rounds, lambda: [facts(i, 1e9 + i) for i in range(n)])
    per: dict[str, float] = {"facts_only_us": base / n * 1e6}
    for k in (0, 3, 10):
        counters = SloCounters(slos(k))
        fs = [facts(i, 1e9 + i) for i in range(n)]
        t = best(args.rounds, lambda c=counters, fs=fs: [c.record(f) for f in fs])
        per[f"record_{k}_slos_us"] = t / n * 1e6
    result["request_path"] = per
    ev = SloEvaluator(slos(10))
    start = 1e9
    minutes = int(WINDOW // 60)
    for (name, sli) in [(s.name, x.label) for s in ev.slos for x in s.slis]:
        tally = ev.tally(name, sli)
        for m in range(minutes):
            tally.add_bucket(int(start // 60) + m, 600, m % 7)
    now = start + WINDOW - 1
    t = best(args.rounds, lambda: ev.status(now) and None)
    result["status_round_10_slos_30d_ms"] = t * 1e3
    rows = [(f"r{i}", 0, facts(i, start + i * 0.01)) for i in range(n)]

    def feed() -> None:
        LedgerFeed(SloEvaluator(slos(10)), 300.0).take(rows)

    t = best(max(1, args.rounds // 2), feed)
    result["feed_rows_per_s_10_slos"] = n / t
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
