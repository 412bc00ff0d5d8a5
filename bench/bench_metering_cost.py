"""What the durable usage path costs the gateway's throughput (non-stream, concurrency 32).

The lean gateway (governance off) against itself with one part of the usage path taken
out (``bench/gateway_variant.py``: no fdatasync; the answer not waiting for the journal;
no journal at all) or synced by its writer thread instead of on the event loop, and
the minimal pass-through, in one interleaved run against the
same mock upstream. Prints JSON: medians over rounds of req/s, the ratio to the
pass-through, and the gateway process's CPU per request.

    python bench/bench_metering_cost.py [--rounds 4] [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_gateway import (
    GATEWAY_CONFIG,
    HERE,
    Target,
    free_port,
    run_and_print,
    run_load,
    wait_port,
)

VARIANTS = ("full", "thread", "nofsync", "nowait", "nojournal")


def start(tmp: Path) -> list[Target]:
    from tokenplane.meta.keystore import KeyStore

    up = free_port()
    targets = [Target("upstream", up, [
        subprocess.Popen([sys.executable, str(HERE / "mock_upstream.py"), str(up)])])]
    port = free_port()
    targets.append(Target("passthrough", port, [subprocess.Popen(
        [sys.executable, str(HERE / "passthrough.py"), str(port), f"http://127.0.0.1:{up}",
         "aiohttp"])]))
    for variant in VARIANTS:
        home = tmp / variant
        store = KeyStore(home / "meta.db")
        key, _ = store.create_key("bench", app="bench")
        store.close()
        cfg = tmp / f"{variant}.yaml"
        cfg.write_text(GATEWAY_CONFIG.format(up=up) + "governance: {enabled: false}\n")
        launcher = (["-m", "tokenplane"] if variant == "full"
                    else [str(HERE / "gateway_variant.py"), variant])
        port = free_port()
        targets.append(Target(f"gateway-lean-{variant}", port, [subprocess.Popen(
            [sys.executable, *launcher, "serve", "--config", str(cfg), "--port", str(port)],
            env={**os.environ, "TOKENPLANE_HOME": str(home)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)], key))
    for t in targets:
        wait_port(t.port, t.procs[0])
    return targets


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        targets = start(Path(tmp))
        raw: dict[str, list[dict[str, Any]]] = {}
        try:
            for _ in range(args.rounds):
                for t in targets[1:]:
                    res = await run_load(t.url, t.key, False, 32, args.seconds, t.cpu)
                    raw.setdefault(t.name, []).append(res)
        finally:
            for t in targets:
                for p in t.procs:
                    p.terminate()
            for t in targets:
                for p in t.procs:
                    p.wait(30)
    base = statistics.median(r["rps"] for r in raw["passthrough"])
    out = {name: {"rps": round(statistics.median(r["rps"] for r in rs)),
                  "over_passthrough": round(statistics.median(r["rps"] for r in rs) / base, 3),
                  "server_cpu_ms_per_request": round(statistics.median(
                      r["server_cpu_ms_per_request"] for r in rs), 3)}
           for name, rs in raw.items()}
    return {"bench": "metering_cost", "rounds": args.rounds, "seconds": args.seconds,
            "results": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=3.0)
    run_and_print(main_async, ap.parse_args())


if __name__ == "__main__":
    main()
