"""The MCP gateway's cost: what a ``tools/call`` through the gateway adds to calling the
server directly, and how long filtering ``tools/list`` takes.

1. **Added latency** (``calls``): a real MCP server (the official SDK's, JSON answers:
   ``tests/mcp/tool_server.py crm``) in its own process, and ``tokenplane serve`` in
   front of it (governance on as by default: audit log, injection screen; result tokens
   counted). 50 concurrent MCP sessions (each initialized, then calling ``echo`` with a
   short text) send open-loop at a fixed total rate (100 calls/s: each session every
   0.5 s); the same load goes to the server directly and through the gateway, a pair
   of runs per round, their order alternating (ABBA). Per round: p50 and p99 of each;
   added = gateway minus direct, per round; figures are medians over rounds. The
   gateway process's CPU per call is measured too (``/proc``), and pings through the
   gateway (its transport and session without a server). Then the same load *mixed*:
   each session holds a session with the server and one through the gateway and
   alternates its calls between them, so that both series are taken in the same
   instants (on a shared, noisy machine the separate runs' load differs; the mixed
   run's does not): ``mixed_added_*`` is the robust figure.
2. **The gateway's own work** (``service``): ``McpService.post`` on a ``tools/call``
   with an upstream in the process: what the gateway's logic costs, without the
   transport (with governance: injection screen and audit record; without).
3. **tools/list filtering** (``filter``): 500 tools on 5 servers, 200 rules (exact
   names, ``prefix*`` globs, character classes; 20 of them match the caller), the
   principal's view built cold (rules compiled, nothing remembered) and warm (the view
   the gateway keeps per key): the time of ``visible_items`` over all 500 tools.

    python bench/bench_mcp.py [--rounds 10] [--seconds 2] [--rate 100] [--lean] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parents[1]
SESSIONS = 50
HEAD = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    import urllib.error
    import urllib.request
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


async def open_session(http: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> str:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "1"}}}
    async with http.post(url, data=orjson.dumps(init), headers=headers) as r:
        await r.read()
        sid = r.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with http.post(url, data=orjson.dumps(note),
                         headers={**headers, "mcp-session-id": sid}) as r:
        await r.read()
    return sid


async def load(url: str, key: str | None, name: str, seconds: float, rate: float
               ) -> dict[str, float]:
    """``SESSIONS`` sessions, calls spread evenly over them at ``rate`` per second."""
    headers = dict(HEAD)
    if key:
        headers["authorization"] = f"Bearer {key}"
    conn = aiohttp.TCPConnector(limit=0)
    lat: list[float] = []
    errors = 0
    async with aiohttp.ClientSession(connector=conn) as http:
        sids = [await open_session(http, url, headers) for _ in range(SESSIONS)]
        gap = SESSIONS / rate  # each session's interval

        async def session(i: int, sid: str) -> None:
            nonlocal errors
            h = {**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            start = time.monotonic() + gap * i / SESSIONS
            n = 0
            end = start + seconds
            while True:
                at = start + n * gap
                if at >= end:
                    return
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                n += 1
                body = orjson.dumps(
                    {"jsonrpc": "2.0", "id": n, "method": "ping"} if name == "ping" else
                    {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                     "params": {"name": name, "arguments": {"text": f"hello {i} {n}"}}})
                t0 = time.perf_counter()
                async with http.post(url, data=body, headers=h) as r:
                    raw = await r.read()
                lat.append(time.perf_counter() - t0)
                if r.status != 200 or b'"result"' not in raw:
                    errors += 1

        await asyncio.gather(*(session(i, s) for i, s in enumerate(sids)))
    lat.sort()
    return {"calls": len(lat), "errors": errors,
            "p50_ms": 1e3 * lat[len(lat) // 2],
            "p99_ms": 1e3 * lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


async def load_mixed(upstream: str, url: str, key: str, seconds: float, rate: float
                     ) -> dict[str, dict[str, float]]:
    """``SESSIONS`` sessions, each holding one session with the server and one through
    the gateway and sending its calls to them in turn: both series are taken in the same
    instants, under the same load of the machine."""
    gw_headers = {**HEAD, "authorization": f"Bearer {key}"}
    lat: dict[str, list[float]] = {"direct": [], "gateway": []}
    errors = {"direct": 0, "gateway": 0}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        pairs = [(await open_session(http, upstream, HEAD),
                  await open_session(http, url, gw_headers)) for _ in range(SESSIONS)]
        gap = SESSIONS / rate

        async def session(i: int, direct_sid: str, gw_sid: str) -> None:
            start = time.monotonic() + gap * i / SESSIONS
            n = 0
            while True:
                at = start + n * gap
                if at >= start + seconds:
                    return
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                n += 1
                which = "direct" if (n + i) % 2 else "gateway"
                target, name = (upstream, "echo") if which == "direct" else (url, "crm__echo")
                h = {**(HEAD if which == "direct" else gw_headers),
                     "mcp-session-id": direct_sid if which == "direct" else gw_sid,
                     "mcp-protocol-version": "2025-11-25"}
                body = orjson.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                     "params": {"name": name,
                                                "arguments": {"text": f"hello {i} {n}"}}})
                t0 = time.perf_counter()
                async with http.post(target, data=body, headers=h) as r:
                    raw = await r.read()
                lat[which].append(time.perf_counter() - t0)
                if r.status != 200 or b'"result"' not in raw:
                    errors[which] += 1

        await asyncio.gather(*(session(i, d, g) for i, (d, g) in enumerate(pairs)))
    out = {}
    for which, xs in lat.items():
        xs.sort()
        out[which] = {"calls": len(xs), "errors": errors[which],
                      "p50_ms": 1e3 * xs[len(xs) // 2],
                      "p99_ms": 1e3 * xs[min(len(xs) - 1, int(len(xs) * 0.99))]}
    return out


def start_gateway(tmp: Path, upstream: str, lean: bool
                  ) -> tuple[subprocess.Popen[bytes], str, str]:
    from tokenplane.meta.keystore import KeyStore
    home = tmp / "gw"
    store = KeyStore(home / "meta.db")
    key, _ = store.create_key("bench", app="bench")
    store.close()
    cfg = tmp / "gw.yaml"
    cfg.write_text(
        "models: [{alias: m, backends: [{type: sim, replicas: 1}]}]\n"
        "observe: {metrics: {listen: null}, access_log: {enabled: false}}\n"
        + ("governance: {enabled: false}\n" if lean else "") +
        f"mcp:\n  servers: [{{name: crm, url: '{upstream}'}}]\n"
        "  rules: [{tenant: bench, allow: ['crm__*']}]\n")
    port = free_port()
    env = {**os.environ, "TOKENPLANE_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "tokenplane", "serve", "--config", str(cfg),
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    wait_http(f"http://127.0.0.1:{port}/health", proc)
    return proc, url, key


async def bench_calls(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tests.mcp.tool_server", "crm",
                               str(port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    upstream = f"http://127.0.0.1:{port}/mcp"
    with tempfile.TemporaryDirectory() as tmp:
        gw = None
        try:
            wait_http(upstream, server)
            gw, url, key = start_gateway(Path(tmp), upstream, args.lean)
            await load(url, key, "crm__echo", 1.0, args.rate)  # warm both
            await load(upstream, None, "echo", 1.0, args.rate)
            rounds = []
            for i in range(args.rounds):
                # each round a pair close in time, its order alternating (ABBA): the
                # machine's load drifts, a pair's two halves see about the same load
                cpu0 = cpu1 = 0.0
                if i % 2 == 0:
                    direct = await load(upstream, None, "echo", args.seconds, args.rate)
                    cpu0 = cpu_seconds(gw.pid)
                    through = await load(url, key, "crm__echo", args.seconds, args.rate)
                    cpu1 = cpu_seconds(gw.pid)
                else:
                    cpu0 = cpu_seconds(gw.pid)
                    through = await load(url, key, "crm__echo", args.seconds, args.rate)
                    cpu1 = cpu_seconds(gw.pid)
                    direct = await load(upstream, None, "echo", args.seconds, args.rate)
                through["gateway_cpu_ms_per_call"] = round(
                    1e3 * (cpu1 - cpu0) / max(1, through["calls"]), 4)
                through["load_1m"] = os.getloadavg()[0]
                # both at once, call by call in turn: the same instants, the same load
                mixed = await load_mixed(upstream, url, key, args.seconds, args.rate)
                # the same load of pings: the transport and session without a server
                cpu0 = cpu_seconds(gw.pid)
                ping = await load(url, key, "ping", args.seconds, args.rate)
                ping["gateway_cpu_ms_per_call"] = round(
                    1e3 * (cpu_seconds(gw.pid) - cpu0) / max(1, ping["calls"]), 4)
                rounds.append({"direct": direct, "gateway": through, "gateway_ping": ping,
                               "mixed": mixed,
                               "mixed_added_p50_ms": mixed["gateway"]["p50_ms"]
                               - mixed["direct"]["p50_ms"],
                               "mixed_added_p99_ms": mixed["gateway"]["p99_ms"]
                               - mixed["direct"]["p99_ms"],
                               "added_p50_ms": through["p50_ms"] - direct["p50_ms"],
                               "added_p99_ms": through["p99_ms"] - direct["p99_ms"]})
        finally:
            for p in (gw, server):
                if p is not None:
                    p.terminate()
                    p.wait(20)

    def med(path: tuple[str, ...]) -> float:
        vals = []
        for r in rounds:
            v: Any = r
            for k in path:
                v = v[k]
            vals.append(v)
        return round(statistics.median(vals), 3)

    return {"sessions": SESSIONS, "rate_per_s": args.rate, "seconds": args.seconds,
            "governance": not args.lean,
            "rounds": rounds,
            "median": {"direct_p50_ms": med(("direct", "p50_ms")),
                       "direct_p99_ms": med(("direct", "p99_ms")),
                       "gateway_p50_ms": med(("gateway", "p50_ms")),
                       "gateway_p99_ms": med(("gateway", "p99_ms")),
                       "added_p50_ms": med(("added_p50_ms",)),
                       "gateway_cpu_ms_per_call": med(("gateway", "gateway_cpu_ms_per_call")),
                       "ping_p50_ms": med(("gateway_ping", "p50_ms")),
                       "mixed_direct_p50_ms": med(("mixed", "direct", "p50_ms")),
                       "mixed_gateway_p50_ms": med(("mixed", "gateway", "p50_ms")),
                       "mixed_direct_p99_ms": med(("mixed", "direct", "p99_ms")),
                       "mixed_gateway_p99_ms": med(("mixed", "gateway", "p99_ms")),
                       "mixed_added_p50_ms": med(("mixed_added_p50_ms",)),
                       "mixed_added_p99_ms": med(("mixed_added_p99_ms",)),
                       "ping_cpu_ms_per_call": med(("gateway_ping", "gateway_cpu_ms_per_call")),
                       "added_p99_ms": med(("added_p99_ms",))}}


def bench_filter(repeat: int = 200) -> dict[str, Any]:
    from tokenplane.auth.principal import Principal
    from tokenplane.config.mcp_schema import McpConfig
    from tokenplane.mcp.listing import visible_items
    from tokenplane.mcp.policy import McpPolicy

    servers = [f"s{i}" for i in range(5)]
    tools = {s: [{"name": f"tool_{j:03d}", "description": "d" * 40,
                  "inputSchema": {"type": "object"}} for j in range(100)] for s in servers}
    rules: list[dict[str, Any]] = []
    for i in range(200):  # 20 for the caller's tenant, 180 for others
        tenant = "t0" if i % 10 == 0 else f"t{i % 37 + 1}"
        kind = i % 3
        s = servers[i % 5]
        allow = ([f"{s}__tool_{i % 100:03d}"] if kind == 0 else
                 [f"{s}__tool_0{i % 10}*"] if kind == 1 else [f"{s}__tool_[0-4]{i % 10}?"])
        rules.append({"tenant": tenant, "allow": allow,
                      "deny": [f"{s}__tool_09{i % 10}"] if i % 4 == 0 else []})
    cfg = McpConfig.model_validate({"servers": [{"name": s, "url": "http://h/mcp"}
                                                for s in servers], "rules": rules})
    policy = McpPolicy(cfg)
    who = Principal("key_x", "t0", app="a")

    def list_all(perms: Any) -> int:
        return sum(len(visible_items(policy, perms, s, "tools/list", tools[s], None))
                   for s in servers)

    cold, warm, compile_ = [], [], []
    visible = 0
    for _ in range(repeat):
        policy = McpPolicy(cfg)
        t0 = time.perf_counter()
        perms = policy.for_principal(who)
        t1 = time.perf_counter()
        visible = list_all(perms)
        t2 = time.perf_counter()
        list_all(perms)
        t3 = time.perf_counter()
        compile_.append(t1 - t0)
        cold.append(t2 - t1)
        warm.append(t3 - t2)
    return {"tools": 500, "rules": 200, "visible": visible,
            "compile_p50_ms": round(1e3 * statistics.median(compile_), 4),
            "cold_p50_ms": round(1e3 * statistics.median(cold), 4),
            "warm_p50_ms": round(1e3 * statistics.median(warm), 4)}


class _Echo:
    """An upstream in this process: the result a JSON-mode SDK server gives ``echo``."""

    name = "crm"

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        text = (params or {}).get("arguments", {}).get("text", "")
        return {"content": [{"type": "text", "text": text}], "isError": False,
                "structuredContent": {"result": text}}

    async def close(self) -> None:
        return None


def bench_service(calls: int = 3000, governance: bool = True) -> dict[str, Any]:
    """The gateway's own work on a tools/call, no transport: ``McpService.post`` with an
    upstream in the process (parse, session, rules, limits, the call, the injection
    screen, token count, audit record, metrics, the answer)."""
    from prometheus_client import CollectorRegistry

    from tokenplane.auth.principal import Principal
    from tokenplane.config.governance_schema import GovernanceConfig
    from tokenplane.config.mcp_schema import McpConfig
    from tokenplane.governance.guard_policy import GuardPolicies
    from tokenplane.mcp.gateway.metrics import McpMetrics
    from tokenplane.mcp.gateway.result_guard import Accounting
    from tokenplane.mcp.gateway.service import Caller, McpService
    from tokenplane.mcp.gateway.sessions import MemorySessions
    from tokenplane.mcp.policy import McpPolicy
    from tokenplane.tokens.registry import TokenizerRegistry

    cfg = McpConfig.model_validate({"servers": [{"name": "crm", "url": "http://h/mcp"}],
                                    "rules": [{"tenant": "bench", "allow": ["crm__*"]}]})
    tok = TokenizerRegistry().get("tiktoken:cl100k_base")
    audited: list[Any] = []
    service = McpService(
        McpPolicy(cfg), {"crm": _Echo()}, MemorySessions(3600),
        Accounting(lambda _: "m", lambda _t, _a: True, lambda _: tok),
        McpMetrics(CollectorRegistry()),
        GuardPolicies(GovernanceConfig()) if governance else None,
        (lambda e, ts: audited.append(e)) if governance else None)
    who = Principal("key_b", "bench", app="bench")

    async def run() -> list[float]:
        init = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                             "params": {"protocolVersion": "2025-11-25"}})
        sid = (await service.post(Caller(who, None), init)).headers["mcp-session-id"]
        caller = Caller(who, None, session_id=sid)
        out = []
        for n in range(-200, calls):  # the first 200: warm-up, not counted
            body = orjson.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                 "params": {"name": "crm__echo",
                                            "arguments": {"text": f"hello {n} from bench"}}})
            t0 = time.perf_counter()
            reply = await service.post(caller, body)
            if n >= 0:
                out.append(time.perf_counter() - t0)
            assert reply.status == 200 and reply.body is not None and "result" in reply.body
            audited.clear()
        return out

    lat = sorted(asyncio.run(run()))
    return {"calls": calls, "governance": governance,
            "p50_us": round(1e6 * lat[len(lat) // 2], 1),
            "p99_us": round(1e6 * lat[int(len(lat) * 0.99)], 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=100.0, help="calls per second in all")
    ap.add_argument("--only", choices=["calls", "filter", "service"])
    ap.add_argument("--lean", action="store_true",
                    help="governance off (no audit record, no injection screen)")
    ap.add_argument("--out")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    out: dict[str, Any] = {}
    if args.only in (None, "filter"):
        out["filter"] = bench_filter()
    if args.only in (None, "service"):
        out["service"] = [bench_service(governance=True), bench_service(governance=False)]
    if args.only in (None, "calls"):
        out["calls"] = asyncio.run(bench_calls(args))
    text = orjson.dumps(out, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
