"""What one scrape of ``/metrics`` costs with ``serve --workers N``, and what the request
path pays for it (nothing: the cells it updates are unchanged plain numbers).

Each simulated worker has a gateway registry filled the way traffic fills it (tenants x
models x statuses for the request, token and cost counters; latency histograms; the
endpoint gauges of one replica per model). All N workers run on this one event loop,
each with its unix socket, so a scrape here also pays its siblings' snapshots in series
(in a gateway they run on other cores, in parallel): an upper bound.

    python bench/bench_metrics_scrape.py [--workers 1 2 4 8] [--tenants 50] [--scrapes 50]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import orjson

from tokenplane.api.metrics_routes import MetricsView
from tokenplane.observe.cells import CounterCell
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.observe.peers import MetricsPeers

MODELS = ("chat", "embed", "reason")
KINDS = ("input_system", "input_user", "input_tools", "cached", "output", "reasoning")


def filled(tenants: int) -> GatewayMetrics:
    m = GatewayMetrics()
    for t in range(tenants):
        for model in MODELS:
            for status, code, outcome in (("ok", "200", "ok"), ("error", "429", "limited"),
                                          ("error", "502", "failures")):
                m.requests.labels(model, "chat", status, code, outcome, f"tenant-{t}").inc(7)
            for kind in KINDS:
                m.tokens.labels(model, kind, f"tenant-{t}").inc(1000)
            m.cost.labels(model, "USD", f"tenant-{t}").inc(123)
    for model in MODELS:
        for op in ("chat", "text_completion"):
            m.e2e.labels(model, op).observe(0.2)
        m.ttft.labels(model).observe(0.05)
        m.tpot.labels(model).observe(0.01)
    return m


def request_path_ns(rounds: int = 2_000_000) -> float:
    """One counter-cell increment, as the meter finisher does a dozen times a request."""
    cell = CounterCell()
    inc = cell.inc
    t0 = time.perf_counter_ns()
    for _ in range(rounds):
        inc(1.0)
    return (time.perf_counter_ns() - t0) / rounds


async def scrape_ms(workers: int, tenants: int, scrapes: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        views, peers = [], []
        for i in range(workers):
            view = MetricsView(filled(tenants), f"w{i}")
            if workers > 1:
                view.peers = MetricsPeers(run, i, workers, view.local)
                await view.peers.start()
                peers.append(view.peers)
            views.append(view)
        try:
            body = await views[0].render()
            times = []
            for _ in range(scrapes):
                t0 = time.perf_counter()
                body = await views[0].render()
                times.append(time.perf_counter() - t0)
        finally:
            for p in peers:
                await p.close()
    times.sort()
    return times[len(times) // 2] * 1000, len(body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--tenants", type=int, default=50)
    ap.add_argument("--scrapes", type=int, default=50)
    args = ap.parse_args()
    print(orjson.dumps({"bench": "metrics_request_path", "cell_inc_ns": round(
        request_path_ns(), 1), "note": "unchanged by the summed view"}).decode())
    for n in args.workers:
        ms, size = asyncio.run(scrape_ms(n, args.tenants, args.scrapes))
        print(orjson.dumps({"bench": "metrics_scrape", "workers": n, "tenants": args.tenants,
                            "scrape_ms_p50": round(ms, 2), "body_bytes": size}).decode())


if __name__ == "__main__":
    main()
