"""Sustained usage ingest: journal (append -> fsync -> flush -> sink) vs raw sink writes.

For SQLite and PostgreSQL, in the same run:
  baseline   raw ``sink.write`` of pre-built batches, no journal (the sink's ceiling)
  journaled  ``Meter.record`` from waves of concurrent requests, each awaiting its own
             durable ack, with the flusher moving batches to the sink meanwhile; the
             clock stops when ``close()`` has drained everything into the ledger.
Target: >= 20,000 events/s end to end for each sink. Prints JSON.

    python bench/bench_ledger.py [--events 100000] [--wave 1000] [--sink-batch 10000]
                                 [--pg DSN] [--no-pg]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import orjson

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.meter import Meter
from tokenplane.metering.stores.open import open_sink

TARGET_EPS = 20_000


def make_events(n: int, prefix: str, seed: int = 1) -> list[UsageEvent]:
    rng = random.Random(seed)
    t0 = time.time() - 3600
    out = []
    # an API key belongs to one app of one department of one tenant
    keys = [(f"key-{k}", f"tenant-{k % 10}", f"dept-{k % 4}", f"app-{k % 5}") for k in range(40)]
    for i in range(n):
        system, history = rng.randrange(50, 800), rng.randrange(0, 3000)
        user = rng.randrange(5, 300)
        prompt = system + history + user
        key_id, tenant, department, app = rng.choice(keys)
        out.append(
            UsageEvent(
                request_id=f"{prefix}-{i}",
                attempt=0,
                ts=t0 + i * 0.002,
                tenant=tenant,
                department=department,
                app=app,
                key_id=key_id,
                end_user=f"user-{rng.randrange(1000)}",
                model=rng.choice(["chat-large", "chat-small", "embed"]),
                backend="vllm-0",
                response_model="Qwen/Qwen2.5-7B-Instruct",
                stream=True,
                arrival_ts=t0,
                upstream_start_ts=t0 + 0.001,
                first_token_ts=t0 + 0.1,
                last_token_ts=t0 + 1.2,
                input_system=system,
                input_history=history,
                input_user=user,
                input_tokens=prompt,
                cached_input_tokens=system,
                output_tokens=rng.randrange(1, 600),
                estimated_input_tokens=prompt,
                cost_micros=rng.randrange(10, 5000),
                price_version="bench",
                system_fingerprint=f"fp-{rng.randrange(30)}",
            )
        )
    return out


async def baseline(target: str, events: list[UsageEvent], batch: int) -> dict[str, Any]:
    sink = await open_sink(target)
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(events), batch):
            await sink.write(events[i : i + batch])
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        await sink.close()
    return {
        "events": len(events),
        "seconds": round(elapsed, 3),
        "eps": round(len(events) / elapsed),
        "cpu_us_per_event": round(cpu / len(events) * 1e6, 1),
    }


async def journaled(
    data_dir: Path, target: str, events: list[UsageEvent], wave: int
) -> dict[str, Any]:
    meter = Meter(data_dir, target)
    await meter.start()
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(events), wave):
        await asyncio.gather(*(meter.record(ev) for ev in events[i : i + wave]))
    acked = time.perf_counter() - start
    await meter.close()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = meter.stats()
    return {
        "events": len(events),
        "ack_seconds": round(acked, 3),
        "ack_eps": round(len(events) / acked),
        "seconds": round(elapsed, 3),
        "eps": round(len(events) / elapsed),
        "cpu_us_per_event": round(cpu / len(events) * 1e6, 1),
        "fsyncs": stats.syncs,
        "events_per_fsync": round(stats.committed / max(1, stats.syncs), 1),
        "inserted": stats.inserted,
    }


async def run_backend(
    name: str, target: str, work: Path, n: int, wave: int, sink_batch: int
) -> dict[str, Any]:
    base = await baseline(target, make_events(n, f"{name}-raw"), batch=sink_batch)
    jr = await journaled(work / f"{name}-data", target, make_events(n, f"{name}-jr"), wave)
    return {
        "baseline_raw_sink": base,
        "journaled": jr,
        "journal_overhead": round(base["eps"] / jr["eps"], 2),
        "target_eps": TARGET_EPS,
        "meets_target": jr["eps"] >= TARGET_EPS,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--wave", type=int, default=1000, help="concurrent records per wave")
    parser.add_argument(
        "--sink-batch", type=int, default=10_000, help="baseline batch (= Meter flush_max_rows)"
    )
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--no-pg", action="store_true")
    args = parser.parse_args()
    result: dict[str, Any] = {
        "bench": "ledger",
        "events": args.events,
        "wave": args.wave,
        "sink_batch": args.sink_batch,
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        result["sqlite"] = await run_backend(
            "sqlite", str(work / "ledger.db"), work, args.events, args.wave, args.sink_batch
        )
        if not args.no_pg:
            schema = f"tp_bench_{uuid.uuid4().hex[:10]}"
            try:
                result["postgres"] = await run_backend(
                    "postgres",
                    f"{args.pg}?schema={schema}",
                    work,
                    args.events,
                    args.wave,
                    args.sink_batch,
                )
            finally:
                con = await asyncpg.connect(args.pg)
                await con.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                await con.close()
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    asyncio.run(main())
