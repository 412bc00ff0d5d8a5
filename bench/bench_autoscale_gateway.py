"""The embedded autoscaler on a real gateway: ``tokenplane serve --config
examples/autoscale.yaml`` (one Llama-3-8B/A100 simulated replica, 1..4, a cold start
of 5 s, decisions every 2 s, a 1-minute cooldown) takes two bursts of long-prompt
chat requests through the official ``openai`` client, then nothing. The bench polls
``GET /admin/v1/autoscale`` (every 0.25 s) and prints one JSON document:

- ``timeline``: (seconds since the first burst, serving, starting, warm, draining,
  desired) at each change;
- ``scale_up_decision_s`` / ``scale_up_serving_s``: from the first request to the
  first scale-up decision, and to the first started replica serving;
- ``scale_down_s``: from the last request's end to the pool back at one replica;
- ``requests`` / ``failed``, and the latency quantiles of the bursts;
- ``round_us``: the controller's cost of one round for one pool (in process, 2000
  rounds, nothing else running), off the request path.

Usage: python bench/bench_autoscale_gateway.py [--requests 64] [--prompt-words 1200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import yaml

from tokenplane.app import build_gateway
from tokenplane.compose.config_file import validate_config

ROOT = Path(__file__).resolve().parents[1]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(env: dict[str, str], *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "tokenplane", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=True, timeout=120).stdout


async def _burst(client: openai.AsyncOpenAI, n: int, words: int) -> list[float | None]:
    prompt = " ".join(f"token{i % 97}" for i in range(words))

    async def one(i: int) -> float | None:
        t0 = time.perf_counter()
        try:
            r = await client.chat.completions.create(
                model="chat", max_tokens=128,
                messages=[{"role": "user", "content": f"{i} {prompt}"}])
            assert r.usage is not None and r.usage.completion_tokens == 128
        except Exception as exc:  # counted: the figure is that there are none
            print(f"failed: {exc!r}", file=sys.stderr)
            return None
        return time.perf_counter() - t0

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def _watch(url: str, key: str, t0: float, stop: asyncio.Event,
                 timeline: list[tuple[float, ...]], decisions: list[dict[str, Any]]) -> None:
    last: tuple[float, ...] | None = None
    async with httpx.AsyncClient(timeout=10) as http:
        while not stop.is_set():
            body = (await http.get(url, headers={"authorization": f"Bearer {key}"})).json()
            pool = body["pools"][0]
            r = pool["replicas"]
            state = (r.get("serving", 0), r.get("starting", 0), r.get("warm", 0),
                     r.get("draining", 0), pool["desired_serving"] or 0)
            if state != last:
                timeline.append((round(time.monotonic() - t0, 2), *state))
                last = state
            decisions[:] = body["decisions"]
            with contextlib.suppress(TimeoutError):  # a poll of another process
                await asyncio.wait_for(stop.wait(), 0.25)


async def drive(base: str, admin: str, user: str, n: int, words: int) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=base + "/v1", api_key=user, max_retries=0,
                                timeout=120)
    timeline: list[tuple[float, ...]] = []
    decisions: list[dict[str, Any]] = []
    stop = asyncio.Event()
    t0 = time.monotonic()
    watcher = asyncio.create_task(_watch(base + "/admin/v1/autoscale", admin, t0, stop,
                                         timeline, decisions))
    lat = await _burst(client, n, words)
    lat += await _burst(client, n, words)
    done = time.monotonic() - t0
    # the calm: wait for the pool to come back to one replica (cooldown + window)
    while not (timeline and timeline[-1][1:5] == (1, 0, 0, 0)
               and time.monotonic() - t0 > done + 1):
        await asyncio.sleep(0.5)
        if time.monotonic() - t0 > done + 600:
            break
    stop.set()
    await watcher
    await client.close()
    ok = sorted(x for x in lat if x is not None)
    ups = [t for t, *_s in timeline if _s[0] > 1]
    wants = [t for t, *_s in timeline if _s[4] > 1]  # desired above one: a decision
    first_up = next((d for d in decisions if d["direction"] == "up"), None)
    return {
        "timeline": timeline,
        "decisions": [(d["serving_from"], d["serving_to"], d["warm_from"], d["warm_to"],
                       d["reasons"]) for d in decisions],
        "first_up_inputs": first_up["inputs"] if first_up else None,
        "scale_up_decision_s": wants[0] if wants else None,
        "scale_up_serving_s": ups[0] if ups else None,
        "scale_down_s": round(timeline[-1][0] - done, 1),
        "requests": len(lat), "failed": len(lat) - len(ok),
        "latency_p50_s": round(ok[len(ok) // 2], 2) if ok else None,
        "latency_p99_s": round(ok[int(len(ok) * 0.99) - 1], 2) if ok else None,
        "bursts_done_s": round(done, 2),
    }


async def round_cost(cfg: dict[str, Any], home: Path, rounds: int = 2000) -> float:
    gw = build_gateway(validate_config({**cfg, "data_dir": str(home)}))
    ctl = gw.autoscale
    assert ctl is not None
    await gw.start()
    try:
        t0 = time.perf_counter()
        for _ in range(rounds):
            await ctl.step()
        return (time.perf_counter() - t0) / rounds * 1e6
    finally:
        await gw.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=64, help="requests per burst")
    ap.add_argument("--prompt-words", type=int, default=1200)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tp-autoscale-"))
    cfg = yaml.safe_load((ROOT / "examples" / "autoscale.yaml").read_text())
    cfg["data_dir"] = str(tmp / "data")
    cfg["observe"] = {"metrics": {"listen": None}, "access_log": {"enabled": False}}
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "TOKENPLANE_HOME": cfg["data_dir"]}
    admin = _cli(env, "keys", "create", "--tenant", "default", "--admin").split()[-1]
    user = _cli(env, "keys", "create", "--tenant", "default").split()[-1]
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "tokenplane", "serve", "--config",
                             str(path), "--port", str(port)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    for line in proc.stdout:
        if b"tokenplane gateway on" in line:
            break
    try:
        out = asyncio.run(drive(f"http://127.0.0.1:{port}", admin, user, args.requests,
                                args.prompt_words))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    out["round_us"] = round(asyncio.run(round_cost(cfg, tmp / "rounds")), 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
