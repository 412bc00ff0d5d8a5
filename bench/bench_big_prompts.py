"""Other clients' latency while one client sends huge prompts back to back (issue 13,
item 3: before the fix, 3.9 MB prompts took other clients from p50 13 ms to 539 ms).

A gateway (``tokenplane serve``) in front of the fast mock upstream of
``bench_gateway.py`` serves ``--victims`` clients of one tenant sending small chat
requests, first alone (baseline), then while one client of another tenant sends
``--mb`` MB prompts back to back, each different (no cache answers them). Two
scenarios, each its own gateway process:

- ``refused``: the model's window is 8,192 tokens, so every huge prompt gets its 400
  (``context_length_exceeded``) by its floor alone; governance as by default (PII
  log, injection screen, audit).
- ``counted``: a 131,072-token window, beyond the floor's reach (3.9 MB is at least
  ~30,000 tokens): each huge prompt is counted (~1,000,000 tokens), then refused;
  governance as by default.
- ``fits``: a model with a 2,000,000-token window, so each huge prompt is counted
  (off the event loop, with the fix) and forwarded; governance off, to see the cost of
  counting alone (the input guard's scans of such a prompt run on the loop).

Prints JSON: per scenario and phase the victims' p50 / p99 latency and requests per
second, and the attacker's answers (status counts, p50 latency). ``--baseline TREE``
runs the same against the gateway of another checkout (``TREE/src``, e.g. the commit
before the change), in the same run.

    python bench/bench_big_prompts.py [--seconds 6] [--mb 3.9] [--victims 8]
        [--baseline TREE] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_gateway import free_port, wait_port  # noqa: E402

CONFIG = """
models:
  - alias: m
    tokenizer: cl100k_base
    context_window: 8192
    prices: {{input: "0.10", output: "0.40"}}
    backends:
      - {{id: mock, type: vllm, base_url: "http://127.0.0.1:{up}", model: mock}}
  - alias: long
    tokenizer: cl100k_base
    context_window: 131072
    prices: {{input: "0.10", output: "0.40"}}
    backends:
      - {{id: mock-long, type: vllm, base_url: "http://127.0.0.1:{up}", model: mock}}
  - alias: big
    tokenizer: cl100k_base
    context_window: 2000000
    prices: {{input: "0.10", output: "0.40"}}
    backends:
      - {{id: mock-big, type: vllm, base_url: "http://127.0.0.1:{up}", model: mock}}
tenants: [{{name: victim}}, {{name: attacker}}]
"""
SCENARIOS = {"refused": ("m", ""), "counted": ("long", ""),
             "fits": ("big", "governance: {enabled: false}\n")}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(1e3 * values[min(len(values) - 1, int(len(values) * q))], 1) if values else 0.0


def start_gateway(tmp: Path, name: str, up: int, extra: str, src: Path | None
                  ) -> tuple[subprocess.Popen[bytes], int, dict[str, str]]:
    from tokenplane.meta.keystore import KeyStore

    home = tmp / name
    store = KeyStore(home / "meta.db")
    keys = {t: store.create_key(t, app="bench")[0] for t in ("victim", "attacker")}
    store.close()
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(CONFIG.format(up=up) + extra)
    port = free_port()
    env = {**os.environ, "TOKENPLANE_HOME": str(home)}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenplane", "serve", "--config", str(cfg), "--port",
         str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port, keys


async def phase(url: str, keys: dict[str, str], model: str, seconds: float, victims: int,
                attack: bytes | None) -> dict[str, Any]:
    lat: list[float] = []
    attack_lat: list[float] = []
    statuses: collections.Counter[int] = collections.Counter()
    stop = time.perf_counter() + seconds
    vh = {"content-type": "application/json", "authorization": f"Bearer {keys['victim']}"}
    ah = {"content-type": "application/json", "authorization": f"Bearer {keys['attacker']}"}
    counter = iter(range(10**9))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=120)) as s:
        async def victim() -> None:
            while time.perf_counter() < stop:
                text = f"Say hello in one word please. ({next(counter)})"
                body = orjson.dumps({"model": "m", "max_tokens": 16, "messages": [
                    {"role": "user", "content": text}]})
                t0 = time.perf_counter()
                async with s.post(url, data=body, headers=vh) as r:
                    await r.read()
                    if r.status != 200:
                        raise RuntimeError(f"victim got {r.status}: {await r.text()}")
                lat.append(time.perf_counter() - t0)

        async def attacker() -> None:
            assert attack is not None
            n = 0
            while time.perf_counter() < stop:
                n += 1  # a different prompt each time: nothing cached answers it
                body = b'{"model": "%s", "max_tokens": 16, "messages": [{"role": "user", ' \
                       b'"content": "%d %s"}]}' % (model.encode(), n, attack)
                t0 = time.perf_counter()
                async with s.post(url, data=body, headers=ah) as r:
                    await r.read()
                    statuses[r.status] += 1
                attack_lat.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        tasks = [victim() for _ in range(victims)]
        if attack is not None:
            tasks.append(attacker())
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - t0
    out: dict[str, Any] = {"victim_p50_ms": pct(lat, 0.5), "victim_p99_ms": pct(lat, 0.99),
                           "victim_rps": round(len(lat) / elapsed, 1), "victim_n": len(lat)}
    if attack is not None:
        out["attack_statuses"] = {str(k): v for k, v in sorted(statuses.items())}
        out["attack_p50_ms"] = pct(attack_lat, 0.5)
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    words = b"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod "
    attack = (words * (int(args.mb * 1e6) // len(words) + 1))[: int(args.mb * 1e6)]
    trees: dict[str, Path | None] = {"gateway": None}
    if args.baseline is not None:
        trees["gateway-base"] = args.baseline / "src"
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        up = free_port()
        upstream = subprocess.Popen([sys.executable, str(HERE / "mock_upstream.py"), str(up)])
        procs = [upstream]
        try:
            wait_port(up, upstream)
            for scenario, (model, extra) in SCENARIOS.items():
                for tree, src in trees.items():
                    proc, port, keys = start_gateway(Path(tmp), f"{tree}-{scenario}", up,
                                                     extra, src)
                    procs.append(proc)
                    url = f"http://127.0.0.1:{port}/v1/chat/completions"
                    await phase(url, keys, model, 1.0, args.victims, None)  # warm up
                    base = await phase(url, keys, model, args.seconds, args.victims, None)
                    hit = await phase(url, keys, model, args.seconds, args.victims, attack)
                    results[f"{scenario}/{tree}"] = {"baseline": base, "attack": hit}
                    print(f"{scenario}/{tree}: {results[f'{scenario}/{tree}']}",
                          file=sys.stderr)
                    proc.terminate()
                    proc.wait(30)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    p.wait(30)
    return {"mb": args.mb, "victims": args.victims, "seconds": args.seconds,
            "results": results}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--mb", type=float, default=3.9)
    ap.add_argument("--victims", type=int, default=8)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import uvloop

    out = uvloop.run(main_async(args))
    text = orjson.dumps(out, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
