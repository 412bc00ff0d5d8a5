"""Console pages on a ledger of a million events: every page under 500 ms p95.

Generates ``--events`` usage events over the last 30 days (20 tenants, 3 departments
and 4 apps each, one key per app, 3 models in 2 versions each, errors and refusals)
and writes them through the ledger sink, which maintains the rollups as the gateway's
flusher does. Then serves the data directory with ``tokenplane serve`` ``--starts``
times: after each start it signs in and asks every page once, the Advice page first
(*cold*: the first view after start, while the gateway may still be computing its
default advice document; ``--forget`` removes the advice document a previous start
saved, so each start is a first one); after the first start it also asks each page ``--repeat``
times after one warm-up (*warm*), for an admin key and for a tenant's key. Prints JSON;
``--out FILE`` also writes it. ``--keep DIR`` keeps (or reuses) the data directory,
so another tree's server (``PYTHONPATH=<tree>/src``) can be timed on the same ledger.

    python bench/bench_console.py [--events 1000000] [--repeat 20] [--starts 5]
                                  [--keep DIR] [--out bench/out/console.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tokenplane.meta.keystore import KeyStore
from tokenplane.metering.events import UsageEvent
from tokenplane.metering.stores.open import open_sink

DAY = 86400
CHUNK = 50_000
CONFIG = """\
models:
  - alias: m0
    chat_template: llama3
    prices: {input: "0.10", cached_input: "0.05", output: "0.40"}
    backends: [{type: sim, profile: instant, replicas: 2}]
observe: {metrics: {listen: null}, access_log: {enabled: false}}
"""


def events(n: int, end: float, seed: int = 0) -> Any:
    """``n`` events, oldest first, in chunks of ``CHUNK``."""
    rng = random.Random(seed)
    start = end - 30 * DAY
    step = (end - start) / n
    chunk: list[UsageEvent] = []
    for i in range(n):
        ts = start + i * step
        t = rng.randrange(20)
        d = rng.randrange(3)
        a = rng.randrange(4)
        m = rng.randrange(3)
        ev = UsageEvent(
            request_id=f"r{i:08d}", attempt=0, ts=ts, tenant=f"tenant{t:02d}",
            department=f"dept{d}", app=f"app{d}{a}", key_id=f"key_{t}_{d}_{a}",
            model=f"m{m}", model_version=f"v{1 + (i & 1)}", arrival_ts=ts - 1.5)
        if i % 200 == 7:  # refused by admission: never reached an upstream
            ev.status, ev.http_status, ev.error_code = "error", 429, "rate_limit_exceeded"
            ev.estimated_input_tokens = 300
        else:
            system, history, user = 200, rng.randrange(0, 2000), rng.randrange(10, 200)
            out = rng.randrange(20, 400)
            ev.upstream_start_ts = ts - 1.49
            ev.queue_wait_s = 0.002 if i % 5 else 0.2
            ev.first_token_ts = ts - 1.2
            ev.last_token_ts = ts - 0.001
            ev.input_system, ev.input_history, ev.input_user = system, history, user
            ev.input_tokens = ev.estimated_input_tokens = system + history + user
            ev.cached_input_tokens = system if i % 3 else 0
            ev.output_tokens = out
            ev.cost_micros = (system + history + user) // 10 + out * 4 // 10
            if i % 50 == 3:
                ev.status, ev.http_status, ev.error_code = "error", 502, "upstream_error"
        chunk.append(ev)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def write(home: Path, n: int, end: float) -> None:
    sink = await open_sink(str(home / "ledger.db"))
    try:
        for chunk in events(n, end):
            for k in range(0, len(chunk), 5000):
                await sink.write(chunk[k:k + 5000])
    finally:
        await sink.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sign_in(base: str, key: str) -> httpx.Client:
    h = httpx.Client(base_url=base, timeout=60)
    form = h.get("/console/login").text
    token = re.search(r'name="csrf" value="([^"]+)"', form)
    assert token is not None
    r = h.post("/console/login", data={"key": key, "csrf": token.group(1)},
               headers={"origin": base})
    assert r.status_code == 303, r.text
    return h


def ask(h: httpx.Client, url: str) -> float:
    t0 = time.perf_counter()
    r = h.get(url)
    ms = (time.perf_counter() - t0) * 1000
    assert r.status_code == 200, (url, r.status_code, r.text[:300])
    return ms


def summary(times: list[float]) -> dict[str, Any]:
    times = sorted(times)
    return {"n": len(times), "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[max(0, int(len(times) * 0.95 + 0.5) - 1)], 1),
            "max_ms": round(times[-1], 1)}


def time_page(h: httpx.Client, url: str, repeat: int) -> dict[str, Any]:
    return summary([ask(h, url) for _ in range(repeat)])


ADMIN_PAGES = [
    "/console/overview", "/console/usage", "/console/usage?tenant=tenant03",
    "/console/usage?tenant=tenant03&department=dept1",
    "/console/usage?tenant=tenant03&department=dept1&app=app12",
    "/console/usage?tenant=tenant03&department=dept1&app=app12&by=model",
    "/console/usage?grain=hour&since=48h", "/console/usage?since=30d",
    "/console/usage.csv?since=30d", "/console/budgets", "/console/slos",
    "/console/cluster", "/console/sessions", "/console/audit", "/console/versions",
    "/console/versions?since=30d", "/console/advice",
]
TENANT_PAGES = [
    "/console/overview", "/console/usage", "/console/usage?since=30d",
    "/console/usage?department=dept2&app=app21", "/console/budgets", "/console/versions",
    "/console/audit",
]


class Server:
    """``tokenplane serve`` on the data directory, started and stopped; ``src``: the
    source tree to run it from (``PYTHONPATH``; None: the installed package)."""

    def __init__(self, home: Path, src: str | None = None) -> None:
        self.home, self.src = home, src
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tokenplane", "serve", "--config",
             str(self.home / "gw.yaml"), "--port", str(self.port)],
            env={**os.environ, "TOKENPLANE_HOME": str(self.home),
                 **({"PYTHONPATH": str(Path(self.src).resolve())} if self.src else {})},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:  # a bounded wait for the server process to listen
            try:
                if httpx.get(self.base + "/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("the gateway did not start")
            time.sleep(0.05)

    def __exit__(self, *_: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(30)


def cold_order(urls: list[str]) -> list[str]:
    """The Advice page first (the worst moment for it), then the others."""
    return sorted(urls, key=lambda u: not u.startswith("/console/advice"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--keep", default=None, help="Keep (or reuse) the data directory here.")
    ap.add_argument("--forget", action="store_true",
                    help="Remove the saved advice document before each start (a first start).")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    home = Path(args.keep or tempfile.mkdtemp(prefix="bench-console-"))
    home.mkdir(parents=True, exist_ok=True)
    gen_s = 0.0
    if not (home / "ledger.db").exists():
        t0 = time.perf_counter()
        asyncio.run(write(home, args.events, time.time() - 60))
        gen_s = time.perf_counter() - t0
    keys = KeyStore(home / "meta.db")
    admin, _ = keys.create_key("ops", admin=True)
    tenant, _ = keys.create_key("tenant03", department="dept2", app="app21")
    keys.close()
    (home / "gw.yaml").write_text(CONFIG)
    who_keys = (("admin", admin, ADMIN_PAGES), ("tenant", tenant, TENANT_PAGES))
    cold: dict[str, list[float]] = {}
    pages: dict[str, Any] = {}
    for start in range(args.starts):
        if args.forget:
            shutil.rmtree(home / "advice", ignore_errors=True)
        with Server(home) as server:
            for who, key, urls in who_keys:
                h = sign_in(server.base, key)
                try:
                    for url in cold_order(urls):
                        cold.setdefault(f"{who} {url}", []).append(ask(h, url))
                    if start == 0:
                        for url in urls:
                            h.get(url)  # warm-up
                            pages[f"{who} {url}"] = time_page(h, url, args.repeat)
                finally:
                    h.close()
    rows = {}
    db = sqlite3.connect(home / "ledger.db")
    for table in ("usage_events", "usage_rollups", "version_rollups", "advice_rollups"):
        rows[table] = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    db.close()
    cold_pages = {k: summary(v) for k, v in cold.items()}
    worst = max(p["p95_ms"] for p in pages.values())
    worst_cold = max(p["p95_ms"] for p in cold_pages.values())
    out = {"events": args.events, "generate_and_write_s": round(gen_s, 1), "rows": rows,
           "repeat": args.repeat, "starts": args.starts, "forget": args.forget,
           "worst_p95_ms": worst,
           "worst_cold_p95_ms": worst_cold, "under_500ms": max(worst, worst_cold) < 500,
           "pages": pages, "cold": cold_pages}
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
