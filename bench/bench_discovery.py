"""Discovered replicas on a real gateway: how long a replica takes to join after
Kubernetes says it is ready (the EndpointSlice watch event, then the first healthy
scrape), how long an idle one takes to leave after it stops being ready, how long
a DNS-discovered one takes to join (an SRV change picked up on the next poll), and
whether a steady stream of requests (official ``openai`` client, 3 threads, half
streamed) sees a failure while replicas keep joining and draining.

Uses the tests' fake Kubernetes API server (real EndpointSlice JSON, list + watch)
and local DNS server, and real simulated engines over HTTP on loopback addresses
127.0.0.1..3 (one per "pod"). Prints one JSON document.

Usage: python bench/bench_discovery.py [--cycles 20] [--dns-interval 1.0]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' fakes (Kubernetes API, DNS, engines, load)

from tests.discovery.dns_server import DnsServer  # noqa: E402
from tests.discovery.engines import EngineFarm, free_port_on  # noqa: E402
from tests.discovery.load import Load, in_pool, routable, wait_for  # noqa: E402
from tests.gateway.harness import GatewayThread  # noqa: E402
from tests.kube.fake_api import FakeKube, write_kubeconfig  # noqa: E402

ALIAS = "llama"
HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


def quantiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"p50_ms": round(statistics.median(xs) * 1000, 1),
            "p95_ms": round(xs[min(len(xs) - 1, int(0.95 * len(xs)))] * 1000, 1),
            "max_ms": round(xs[-1] * 1000, 1)}


def gateway_config(discovery: dict[str, Any]) -> dict[str, Any]:
    return {
        "models": [{"alias": ALIAS, "tokenizer": "cl100k_base", "context_window": 4096,
                    "backends": [{"id": "engine", "type": "vllm", "discovery": discovery}]}],
        "routing": {"scrape_interval_s": 1.0},
        "observe": {"metrics": {"listen": None}, "access_log": {"enabled": False}},
    }


def kubernetes_run(tmp: Path, cycles: int) -> dict[str, Any]:
    kube = FakeKube().start()
    farm = EngineFarm(ALIAS, profile="llama3-8b-a100")
    port = free_port_on(*HOSTS)
    ids = [f"engine/{h}:{port}" for h in HOSTS]
    for h in HOSTS:
        farm.start(h, port)

    def slice_of(ready: list[int]) -> None:
        kube.set_slice("engine-1", "engine", port, [(HOSTS[i], True, False) for i in ready]
                       + [(HOSTS[i], False, True) for i in range(3) if i not in ready],
                       namespace="serving")

    slice_of([0])
    kubeconfig = write_kubeconfig(tmp / "kubeconfig", kube.url, kube.token)
    gw = GatewayThread(gateway_config({"kind": "kubernetes", "service": "engine",
                                       "namespace": "serving",
                                       "kubeconfig": str(kubeconfig)}), tmp / "gw").start()
    joins: list[float] = []
    leaves: list[float] = []
    try:
        wait_for(gw, lambda: routable(gw, ALIAS) == {ids[0]}, "the first replica")
        # idle joins and leaves: replica 1 comes and goes
        for _ in range(cycles):
            t0 = time.perf_counter()
            slice_of([0, 1])
            wait_for(gw, lambda: ids[1] in routable(gw, ALIAS), "a join", timeout=60)
            joins.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            slice_of([0])
            wait_for(gw, lambda: ids[1] not in in_pool(gw, ALIAS), "a leave", timeout=60)
            leaves.append(time.perf_counter() - t0)
        # churn under load: replicas 1 and 2 join and drain in turn, 0 stays
        load = Load(gw, gw.create_key("default", app="bench"), ALIAS, max_tokens=24).start()
        t0 = time.perf_counter()
        try:
            for i in range(cycles):
                other = 1 + i % 2
                slice_of([0, other])
                wait_for(gw, lambda o=other: ids[o] in routable(gw, ALIAS), "a join", 60)  # type: ignore[misc]
                before = load.ok
                wait_for(gw, lambda b=before: load.ok >= b + 3, "requests", 60)  # type: ignore[misc]
                slice_of([0])
                wait_for(gw, lambda o=other: ids[o] not in in_pool(gw, ALIAS), "a drain", 60)  # type: ignore[misc]
        finally:
            load.stop()
        churn_s = time.perf_counter() - t0
    finally:
        gw.stop()
        farm.close()
        kube.stop()
    return {"join_after_ready": quantiles(joins), "leave_when_idle": quantiles(leaves),
            "churn": {"cycles": cycles, "seconds": round(churn_s, 1), "requests": load.ok,
                      "failed": len(load.failures), "failures": load.failures[:5],
                      "watches": kube.watches, "lists": kube.lists}}


def dns_run(tmp: Path, cycles: int, interval: float) -> dict[str, Any]:
    dns = DnsServer().start()
    farm = EngineFarm(ALIAS, profile="instant")
    port = free_port_on(*HOSTS[:2])
    ids = [f"engine/{h}:{port}" for h in HOSTS[:2]]
    for h in HOSTS[:2]:
        farm.start(h, port)
    name = "_http._tcp.engine.test"

    def srv(hosts: list[int]) -> None:
        dns.set(name, "SRV", [f"0 5 {port} {HOSTS[i]}." for i in hosts])

    srv([0])
    gw = GatewayThread(gateway_config({"kind": "dns", "name": name, "record": "SRV",
                                       "interval_s": interval,
                                       "nameserver": dns.address}), tmp / "gw-dns").start()
    joins: list[float] = []
    try:
        wait_for(gw, lambda: routable(gw, ALIAS) == {ids[0]}, "the first replica")
        for _ in range(cycles):
            t0 = time.perf_counter()
            srv([0, 1])
            wait_for(gw, lambda: ids[1] in routable(gw, ALIAS), "a join", timeout=60)
            joins.append(time.perf_counter() - t0)
            srv([0])
            wait_for(gw, lambda: ids[1] not in in_pool(gw, ALIAS), "a leave", timeout=60)
    finally:
        gw.stop()
        farm.close()
        dns.stop()
    return {"interval_s": interval, "join_after_record": quantiles(joins),
            "queries": len(dns.queries)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--dns-interval", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out = {"kubernetes": kubernetes_run(tmp, args.cycles),
               "dns_srv": dns_run(tmp, args.cycles // 2, args.dns_interval)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
