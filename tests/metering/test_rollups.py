from __future__ import annotations

import asyncio
import random
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.rollups import DIMENSIONS, MEASURES
from tokenplane.metering.stores.base import LedgerSink, row_event
from tokenplane.metering.stores.open import open_sink

WIDTHS = {"minute": 60, "hour": 3600, "day": 86400}

events_st = st.builds(
    UsageEvent,
    request_id=st.sampled_from([f"r{i}" for i in range(12)]),
    attempt=st.integers(0, 1),
    ts=st.floats(1_700_000_000, 1_700_000_000 + 3 * 86400, allow_nan=False),
    tenant=st.sampled_from(["a", "b"]),
    app=st.sampled_from(["chat", "rag"]),
    model=st.sampled_from(["m1", "m2"]),
    key_id=st.sampled_from(["k1", "k2"]),
    status=st.sampled_from(["ok", "error", "cancelled"]),
    http_status=st.sampled_from([200, 400, 404, 415, 429, 499, 502, 504]),
    input_system=st.integers(0, 5000),
    input_user=st.integers(0, 5000),
    input_context=st.integers(0, 5000),
    input_tokens=st.integers(0, 20000),
    cached_input_tokens=st.integers(0, 1000),
    output_tokens=st.integers(0, 4000),
    reasoning_tokens=st.integers(0, 100),
    cost_micros=st.integers(0, 10**9),
    estimated_input_tokens=st.integers(0, 20000),
    upstream_start_ts=st.sampled_from([None, 1_700_000_000.0]),
    currency=st.sampled_from(["USD", "EUR"]),
    system_fingerprint=st.sampled_from([None, "fp1", "fp2"]),
)


def expected_rollups(events: list[UsageEvent]) -> dict[tuple[Any, ...], list[int]]:
    """Sums computed straight from the stored events, independently of the sink code."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for ev in events:
        for grain, width in WIDTHS.items():
            key = (grain, int(ev.ts) // width * width, *(getattr(ev, d) for d in DIMENSIONS))
            ran = ev.upstream_start_ts is not None  # refused requests are counted apart
            derived = {"estimated_input_tokens": ev.estimated_input_tokens if ran else 0,
                       "refused": int(not ran),
                       "refused_input_tokens": 0 if ran else ev.estimated_input_tokens}
            # the four kinds of request that did not end ok, each counted once
            failed = ev.status == "error"
            left = ev.status == "cancelled" or (failed and ev.http_status == 499)
            ours = failed and not left and ev.http_status == 429 and not ran
            client = failed and not left and ev.http_status in (400, 404, 415)
            derived |= {"limited": int(ours), "client_errors": int(client),
                        "cancelled": int(left),
                        "failures": int(failed and not (left or ours or client))}
            values = [1, int(ev.status != "ok")] + [
                derived[m] if m in derived else getattr(ev, m) for m in MEASURES[2:]]
            acc = out.setdefault(key, [0] * len(MEASURES))
            for i, v in enumerate(values):
                acc[i] += v
    return out


def expected_fingerprints(events: list[UsageEvent]) -> dict[tuple[str, ...], list[float]]:
    out: dict[tuple[str, ...], list[float]] = {}
    for ev in events:
        if ev.system_fingerprint is None:
            continue
        key = (ev.tenant, ev.app, ev.system_fingerprint)
        cur = out.setdefault(key, [0, 0, ev.ts, ev.ts])
        cur[0] += 1
        cur[1] += ev.input_system
        cur[2], cur[3] = min(cur[2], ev.ts), max(cur[3], ev.ts)
    return out


async def check_rollups(sink: LedgerSink, chunks: list[list[UsageEvent]], replay: int) -> None:
    for chunk in chunks:
        await sink.write(chunk)
    for chunk in chunks[:replay]:  # replays must not count twice
        assert await sink.write(chunk) == 0
    stored = [row_event(r) for r in await sink.fetch("SELECT * FROM usage_events")]
    distinct = {ev.key for chunk in chunks for ev in chunk}
    assert len(stored) == len(distinct)
    cols = ", ".join(("grain", "bucket", *DIMENSIONS, *MEASURES))
    actual = {
        tuple(r[c] for c in ("grain", "bucket", *DIMENSIONS)): [int(r[m]) for m in MEASURES]
        for r in await sink.fetch(f"SELECT {cols} FROM usage_rollups")
    }
    assert actual == expected_rollups(stored)
    fps = {
        (r["tenant"], r["app"], r["fingerprint"]): [
            r["requests"],
            r["system_tokens"],
            r["first_ts"],
            r["last_ts"],
        ]
        for r in await sink.fetch("SELECT * FROM system_fingerprints")
    }
    assert fps == expected_fingerprints(stored)


async def _run_sqlite(chunks: list[list[UsageEvent]], replay: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sink = await open_sink(Path(tmp) / "ledger.db")
        try:
            await check_rollups(sink, chunks, replay)
        finally:
            await sink.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunks=st.lists(st.lists(events_st, max_size=15), min_size=1, max_size=4),
    replay=st.integers(0, 4),
)
def test_rollups_equal_sums_of_raw_events_sqlite(
    chunks: list[list[UsageEvent]], replay: int
) -> None:
    asyncio.run(_run_sqlite(chunks, replay))


async def test_rollups_equal_sums_of_raw_events_postgres(pg_url: str) -> None:
    rng = random.Random(7)
    sink = await open_sink(pg_url)
    try:
        chunks = [
            [
                UsageEvent(
                    request_id=f"r{rng.randrange(300)}",
                    attempt=rng.randrange(2),
                    ts=1_700_000_000 + rng.uniform(0, 2 * 86400),
                    tenant=rng.choice("ab"),
                    app=rng.choice(["chat", "rag"]),
                    model=rng.choice(["m1", "m2"]),
                    status=rng.choice(["ok", "error"]),
                    input_system=rng.randrange(900),
                    input_tokens=rng.randrange(9000),
                    output_tokens=rng.randrange(900),
                    cost_micros=rng.randrange(10**6),
                    system_fingerprint=rng.choice([None, "fp1", "fp2"]),
                )
                for _ in range(rng.randrange(1, 120))
            ]
            for _ in range(6)
        ]
        await check_rollups(sink, chunks, replay=3)
    finally:
        await sink.close()
