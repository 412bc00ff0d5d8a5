"""Gateway overhead: the upstream directly vs minimal pass-throughs vs the gateway.

Two pass-throughs: one on aiohttp's client (the baseline of the figures), one on the
gateway's own HTTP/1.1 client (what the gateway adds over the same transport).

Every target fronts the same fast mock upstream (bench/mock_upstream.py), each in its own
process; the load generator runs here. Non-streaming and streaming (64 output
tokens), at concurrency 1 and 32. Rounds are interleaved and repeated; figures are
medians over rounds. Prints JSON; ``--out FILE`` also writes it.

    python bench/bench_gateway.py [--rounds 3] [--seconds 4] [--out bench/out/gateway.json]

``--baseline TREE`` also runs both gateways from another checkout (``TREE/src``, e.g. a
``git worktree`` of the commit before a change) in the same rounds, and reports each
gateway's figures over its baseline's (``before_after``): a change measured against
what it changed, on the same machine at the same time.

``--access-log`` also runs the governance-off gateway with its access log to a file
and with it off (``gateway-lean-log`` / ``gateway-lean-nolog``), and reports on over
off (``access_log``). The other gateways keep the default (on, to stderr, which this
script discards).

``--slos`` likewise runs the governance-off gateway with three SLOs (two SLIs each,
their live counters on the request path, the ledger-fed evaluation every 10 s) and
without (``gateway-lean-slo`` / ``gateway-lean-noslo``): ``slos``, on over off.

``--console`` likewise runs the governance-off gateway with the web console on (the
default) and off (``gateway-lean-console`` / ``gateway-lean-noconsole``): ``console``,
on over off (the console's routes are off the request path).

``--messages`` also sends, in the same rounds, the same prompt to the default gateway
as an Anthropic Messages body (``POST /v1/messages``, ``x-api-key``; the system prompt
as ``system``, the user turn as the one message, ``max_tokens: 64``): the target
``gateway-messages`` is the ``gateway`` process itself, so the CPU read is the same
process's. The mock upstream stays OpenAI-compatible (the gateway translates). Reports
``messages``: Messages over Chat per mode, requests/s and CPU ms per request. The two
swap order every other round, and the second waits for the process to be idle first
(what the first left to do, the ledger's flush and the audit records, would otherwise be
counted in the second's CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import uvloop

HERE = Path(__file__).resolve().parent
BODY = {"model": "m", "messages": [{"role": "system", "content": "You are a helpful assistant."},
                                   {"role": "user", "content": "Say hello in one word please."}],
        "max_tokens": 64}


def bodies(stream: bool) -> Iterator[bytes]:
    """Request bodies with a different user turn each (like real traffic), so nothing
    keyed on a request's exact content can answer from memory. The system prompt
    repeats, as it does in applications."""
    system = BODY["messages"][0]  # type: ignore[index]
    for n in itertools.count():
        yield orjson.dumps({**BODY, "stream": stream, "messages": [
            system, {"role": "user", "content": f"Say hello in one word please. ({n})"}]})


def messages_bodies(stream: bool) -> Iterator[bytes]:
    """The same prompts as :func:`bodies`, as Anthropic Messages bodies."""
    system = BODY["messages"][0]["content"]  # type: ignore[index]
    for n in itertools.count():
        body: dict[str, Any] = {
            "model": BODY["model"], "max_tokens": BODY["max_tokens"], "system": system,
            "messages": [{"role": "user",
                          "content": f"Say hello in one word please. ({n})"}]}
        if stream:
            body["stream"] = True
        yield orjson.dumps(body)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server on {port} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} not ready")


def _tree(pid: int) -> list[int]:
    """A process and all its descendants (Linux /proc)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            todo.extend(int(c) for c in task.read_text().split())
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, its threads and its child processes."""
    total = 0
    for p in _tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


GATEWAY_CONFIG = """
models:
  - alias: m
    tokenizer: cl100k_base
    context_window: 8192
    prices: {{input: "0.10", output: "0.40"}}
    backends:
      - {{id: mock, type: vllm, base_url: "http://127.0.0.1:{up}", model: mock}}
tenants: [{{name: bench}}]
"""


SLO_CONFIG = """
slo_alerting: {evaluate_every: 10s}
slos:
  - {name: ttft, selector: {model: m}, objective: 0.95,
     slis: [{kind: ttft, threshold: 1s}, {kind: tpot, threshold: 100ms}]}
  - {name: avail, selector: {model: m}, objective: 0.999,
     slis: [{kind: availability}, {kind: latency, threshold: 5s}]}
  - {name: bench-tenant, selector: {tenant: bench}, objective: 0.99,
     slis: [{kind: availability}, {kind: ttft, threshold: 500ms}]}
"""


class Target:
    """One server under test: its URL, its processes (CPU is summed over them and their
    children) and the API key it wants."""

    def __init__(self, name: str, port: int, procs: list[subprocess.Popen[bytes]],
                 key: str = "", messages: bool = False) -> None:
        self.name, self.port, self.procs, self.key = name, port, procs, key
        self.url = f"http://127.0.0.1:{port}"
        self.messages = messages  # sends Anthropic Messages bodies to /v1/messages

    def cpu(self) -> float:
        return sum(cpu_seconds(p.pid) for p in self.procs)


def start_servers(tmp: Path, workers: int, baseline: Path | None = None,
                  ack: str | None = None, access_log: bool = False,
                  slos: bool = False, console: bool = False,
                  messages: bool = False) -> list[Target]:
    """The upstream; pass-throughs on aiohttp's client and on the gateway's; the gateway
    with its default governance (injection screen, PII log, audit) and with governance
    off (the core path). With ``workers > 1`` also the aiohttp pass-through and both
    gateways as that many processes on one port (SO_REUSEPORT), as a multi-core
    deployment runs them."""
    up = free_port()
    upstream = f"http://127.0.0.1:{up}"
    targets = [Target("upstream", up, [
        subprocess.Popen([sys.executable, str(HERE / "mock_upstream.py"), str(up)])])]

    def passthrough(name: str, client: str, n: int) -> None:
        port = free_port()
        targets.append(Target(name, port, [subprocess.Popen(
            [sys.executable, str(HERE / "passthrough.py"), str(port), upstream, client]
            + (["reuse"] if n > 1 else [])) for _ in range(n)]))

    from tokenplane.meta.keystore import KeyStore

    def gateway(name: str, extra: str, n: int, src: Path | None = None) -> None:
        home = tmp / name  # a data dir each (each worker has its own journal writer)
        store = KeyStore(home / "meta.db")
        key, _ = store.create_key("bench", app="bench")
        store.close()
        cfg = tmp / f"{name}.yaml"
        metering = f"metering: {{ack: {ack}}}\n" if ack and src is None else ""
        # the gateways run side by side: none takes the default metrics port (a tree
        # from before the metrics listener knows no such key)
        if src is None or _knows_metrics_listen(src):
            extra = extra.replace("observe: {", "observe: {metrics: {listen: null}, ", 1) \
                if "observe: {" in extra else extra + "observe: {metrics: {listen: null}}\n"
        cfg.write_text(GATEWAY_CONFIG.format(up=up) + extra + metering)
        port = free_port()
        env = {**os.environ, "TOKENPLANE_HOME": str(home)}
        if src is not None:  # that tree's tokenplane first on the path
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
        targets.append(Target(name, port, [subprocess.Popen(
            [sys.executable, "-m", "tokenplane", "serve", "--config", str(cfg), "--port",
             str(port), "--workers", str(n)], env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)], key))

    lean_cfg = "governance: {enabled: false}\n"
    passthrough("passthrough", "aiohttp", 1)
    passthrough("passthrough-h1", "h1", 1)
    gateway("gateway", "", 1)
    gateway("gateway-lean", lean_cfg, 1)
    if baseline is not None:
        gateway("gateway-base", "", 1, baseline / "src")
        gateway("gateway-lean-base", lean_cfg, 1, baseline / "src")
    if access_log:
        gateway("gateway-lean-log", lean_cfg + "observe: {access_log: {path: "
                f"'{tmp / 'access.jsonl'}'}}}}\n", 1)
        gateway("gateway-lean-nolog", lean_cfg + "observe: {access_log: {enabled: false}}\n", 1)
    if slos:
        gateway("gateway-lean-slo", lean_cfg + SLO_CONFIG, 1)
        gateway("gateway-lean-noslo", lean_cfg, 1)
    if console:
        gateway("gateway-lean-console", lean_cfg + "console: {enabled: true}\n", 1)
        gateway("gateway-lean-noconsole", lean_cfg + "console: {enabled: false}\n", 1)
    if workers > 1:
        passthrough(f"passthrough-x{workers}", "aiohttp", workers)
        gateway(f"gateway-x{workers}", "", workers)
        gateway(f"gateway-lean-x{workers}", lean_cfg, workers)
    for t in targets:
        wait_port(t.port, t.procs[0])
    if messages:  # the default gateway's own process, spoken to in Messages
        g = next(t for t in targets if t.name == "gateway")
        targets.insert(targets.index(g) + 1,
                       Target("gateway-messages", g.port, g.procs, g.key, messages=True))
    return targets


def _knows_metrics_listen(src: Path) -> bool:
    """Whether a baseline tree's config has ``observe.metrics.listen`` (a tree from before
    the listener refuses the key; one with it must not take the shared default port)."""
    schema = src / "tokenplane" / "config" / "schema.py"
    return schema.exists() and "listen" in schema.read_text(encoding="utf-8")


async def one(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str],
              stream: bool, path: str = "/v1/chat/completions") -> tuple[float, float]:
    t0 = time.perf_counter()
    ttft = 0.0
    async with session.post(url + path, data=body, headers=headers) as r:
        if r.status != 200:
            raise RuntimeError(f"{url}: HTTP {r.status}: {await r.text()}")
        if stream:
            async for _ in r.content.iter_any():
                if not ttft:
                    ttft = time.perf_counter() - t0
        else:
            await r.read()
    total = time.perf_counter() - t0
    return total, ttft or total


async def run_load(url: str, key: str, stream: bool, conc: int, seconds: float,
                   cpu: Callable[[], float], messages: bool = False) -> dict[str, Any]:
    if messages:
        make = messages_bodies(stream)
        headers = {"content-type": "application/json", "x-api-key": key,
                   "anthropic-version": "2023-06-01"}
        path = "/v1/messages"
    else:
        make = bodies(stream)
        headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
        path = "/v1/chat/completions"
    lat: list[float] = []
    ttfts: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        for _ in range(min(50, conc * 4)):  # warm up connections and caches
            await one(s, url, next(make), headers, stream, path)
        stop = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < stop:
                total, ttft = await one(s, url, next(make), headers, stream, path)
                lat.append(total)
                ttfts.append(ttft)

        t0 = time.perf_counter()
        cpu0 = cpu()
        await asyncio.gather(*(worker() for _ in range(conc)))
        used = cpu() - cpu0
        elapsed = time.perf_counter() - t0
    lat.sort()
    ttfts.sort()
    return {"rps": len(lat) / elapsed, "p50_ms": 1e3 * lat[len(lat) // 2],
            "p99_ms": 1e3 * lat[int(len(lat) * 0.99)], "ttft_p50_ms": 1e3 * ttfts[len(ttfts) // 2],
            "ttft_p99_ms": 1e3 * ttfts[int(len(ttfts) * 0.99)], "n": len(lat),
            "server_cpu_ms_per_request": 1e3 * used / max(1, len(lat))}


def on_over_off(results: dict[str, dict[str, float]], on_name: str,
                off_name: str) -> dict[str, Any]:
    """One feature's cost: the gateway with it against the same gateway without."""
    out: dict[str, Any] = {}
    for mode in ("nonstream", "stream"):
        for conc in (1, 32):
            on = results[f"{mode}/c{conc}/{on_name}"]
            off = results[f"{mode}/c{conc}/{off_name}"]
            out[f"{mode}/c{conc}"] = {
                "throughput_on_over_off": round(on["rps"] / off["rps"], 3),
                "p50_ms_on_minus_off": round(on["p50_ms"] - off["p50_ms"], 3),
                "cpu_ms_per_request_on_minus_off": round(
                    on["server_cpu_ms_per_request"] - off["server_cpu_ms_per_request"], 4),
            }
    return out


def messages_over_chat(raw: dict[str, list[dict[str, Any]]],
                       results: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Messages over Chat on the same gateway process, per mode: the ratio of the
    medians, and the median of the per-round ratios (each round's pair ran back to
    back) with their range."""
    out: dict[str, Any] = {}
    for mode in ("nonstream", "stream"):
        for conc in (1, 32):
            k = f"{mode}/c{conc}/gateway"
            chat, msgs = results[k], results[k + "-messages"]
            pairs = list(zip(raw[k], raw[k + "-messages"], strict=True))
            rps = [m["rps"] / c["rps"] for c, m in pairs]
            cpu = [m["server_cpu_ms_per_request"] / c["server_cpu_ms_per_request"]
                   for c, m in pairs]
            out[f"{mode}/c{conc}"] = {
                "rps_messages_over_chat": round(msgs["rps"] / chat["rps"], 3),
                "cpu_ms_per_request_messages_over_chat": round(
                    msgs["server_cpu_ms_per_request"] / chat["server_cpu_ms_per_request"], 3),
                "rps_ratio_per_round": [round(r, 3) for r in rps],
                "cpu_ratio_per_round": [round(r, 3) for r in cpu],
                "median_round_rps_ratio": round(statistics.median(rps), 3),
                "median_round_cpu_ratio": round(statistics.median(cpu), 3),
                "p50_ms_messages_minus_chat": round(msgs["p50_ms"] - chat["p50_ms"], 3),
                "ttft_p50_ms_messages_minus_chat": round(
                    msgs["ttft_p50_ms"] - chat["ttft_p50_ms"], 3),
            }
    return out


def in_order(targets: list[Target], round_no: int) -> list[Target]:
    """The targets in a round's order: a Messages target and the Chat one of the same
    process swap places every other round (each goes first as often)."""
    if round_no % 2 == 0:
        return targets
    out = list(targets)
    for i, t in enumerate(out):
        if t.messages and i > 0 and out[i - 1].procs is t.procs:
            out[i - 1], out[i] = t, out[i - 1]
    return out


async def settle(cpu: Callable[[], float], idle: float = 0.01, most: float = 3.0) -> None:
    """Waits until a process is idle (under ``idle`` CPU seconds per 0.2 s, at most
    ``most`` seconds): what the previous load left it to do (the ledger's flush, the
    audit records) is not counted in the next target's CPU when both are one process."""
    deadline = time.perf_counter() + most
    while time.perf_counter() < deadline:
        c0 = cpu()
        await asyncio.sleep(0.2)
        if cpu() - c0 < idle:
            return


def median_of(rounds: list[dict[str, Any]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        targets = start_servers(Path(tmp), args.workers, args.baseline, args.ack,
                                args.access_log, args.slos, args.console, args.messages)
        procs = [p for t in targets for p in t.procs]
        try:
            raw: dict[str, list[dict[str, Any]]] = {}
            for r in range(args.rounds):
                for stream in (False, True):
                    for conc in (1, 32):
                        prev: Target | None = None
                        for t in in_order(targets, r):
                            if prev is not None and prev.procs is t.procs:
                                await settle(t.cpu)  # the same process: its deferred work
                            prev = t
                            k = f"{'stream' if stream else 'nonstream'}/c{conc}/{t.name}"
                            res = await run_load(t.url, t.key, stream, conc, args.seconds,
                                                 t.cpu, t.messages)
                            raw.setdefault(k, []).append(res)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
    results = {k: median_of(v) for k, v in raw.items()}
    ratios: dict[str, Any] = {}
    for mode in ("nonstream", "stream"):
        for conc in (1, 32):
            base = results[f"{mode}/c{conc}/passthrough"]
            p1 = results[f"{mode}/c{conc}/passthrough-h1"]
            for gname in ("gateway", "gateway-lean"):
                g = results[f"{mode}/c{conc}/{gname}"]
                ratios[f"{mode}/c{conc}/{gname}"] = {
                    "throughput_gateway_over_passthrough": round(g["rps"] / base["rps"], 3),
                    "added_p50_ms": round(g["p50_ms"] - base["p50_ms"], 3),
                    "added_ttft_p99_ms": round(g["ttft_p99_ms"] - base["ttft_p99_ms"], 3),
                    "cpu_per_request_gateway_over_passthrough": round(
                        g["server_cpu_ms_per_request"] / base["server_cpu_ms_per_request"], 3),
                    # the same figures against a pass-through on the gateway's own client
                    "throughput_gateway_over_passthrough_h1": round(g["rps"] / p1["rps"], 3),
                    "added_p50_ms_over_passthrough_h1": round(g["p50_ms"] - p1["p50_ms"], 3),
                }
            if args.workers > 1:  # every process count against the same machine
                px = results[f"{mode}/c{conc}/passthrough-x{args.workers}"]
                for gname in ("gateway", "gateway-lean"):
                    g = results[f"{mode}/c{conc}/{gname}-x{args.workers}"]
                    ratios[f"{mode}/c{conc}/{gname}-x{args.workers}"] = {
                        "throughput_over_passthrough": round(g["rps"] / base["rps"], 3),
                        "throughput_over_passthrough_x": round(g["rps"] / px["rps"], 3),
                        "added_p50_ms_over_passthrough_x": round(g["p50_ms"] - px["p50_ms"], 3),
                    }
    if args.access_log:
        ratios["access_log"] = on_over_off(results, "gateway-lean-log", "gateway-lean-nolog")
    if args.slos:
        ratios["slos"] = on_over_off(results, "gateway-lean-slo", "gateway-lean-noslo")
    if args.console:
        ratios["console"] = on_over_off(results, "gateway-lean-console",
                                        "gateway-lean-noconsole")
    if args.messages:
        ratios["messages"] = messages_over_chat(raw, results)
    if args.baseline is not None:
        before_after: dict[str, Any] = {}
        for mode in ("nonstream", "stream"):
            for conc in (1, 32):
                for gname in ("gateway", "gateway-lean"):
                    g = results[f"{mode}/c{conc}/{gname}"]
                    b = results[f"{mode}/c{conc}/{gname}-base"]
                    before_after[f"{mode}/c{conc}/{gname}"] = {
                        "throughput_after_over_before": round(g["rps"] / b["rps"], 3),
                        "p50_ms_after_minus_before": round(g["p50_ms"] - b["p50_ms"], 3),
                        "cpu_per_request_after_over_before": round(
                            g["server_cpu_ms_per_request"] / b["server_cpu_ms_per_request"], 3),
                    }
        ratios["before_after"] = before_after
    return {"bench": "gateway_overhead", "rounds": args.rounds, "seconds": args.seconds,
            "ack": args.ack or "default",
            "workers": args.workers,
            "cpus": os.cpu_count(), "results": results, "ratios": ratios}


def run_and_print(main_async: Callable[[argparse.Namespace], Coroutine[Any, Any, dict[str, Any]]],
                  args: argparse.Namespace) -> None:
    """Runs a benchmark's ``main_async(args)`` on uvloop and prints its JSON result;
    also writes it to ``args.out`` when the benchmark has that option and it is set."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as r:
        out = r.run(main_async(args))
    text = orjson.dumps(out, option=orjson.OPT_INDENT_2).decode()
    print(text)
    path: Path | None = getattr(args, "out", None)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--workers", type=int, default=1,
                    help="also run the pass-through and the gateways as N processes")
    ap.add_argument("--ack", choices=["written", "synced"],
                    help="metering.ack of the gateways (default: the config's default)")
    ap.add_argument("--baseline", type=Path,
                    help="a checkout whose src/ also serves both gateways, for before/after")
    ap.add_argument("--access-log", action="store_true",
                    help="also measure the access log on (to a file) against off")
    ap.add_argument("--console", action="store_true",
                    help="Also the lean gateway with the web console on and off.")
    ap.add_argument("--messages", action="store_true",
                    help="also send the same prompts as Anthropic Messages to the default "
                         "gateway (/v1/messages) and report Messages over Chat")
    ap.add_argument("--slos", action="store_true",
                    help="also measure three SLOs evaluated against none")
    run_and_print(main_async, ap.parse_args())


if __name__ == "__main__":
    main()
