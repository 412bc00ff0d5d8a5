"""The common path's cost of the slow-client and large-prompt defences (issue 13,
items 1 and 3), measured in-process on the functions they changed, so that a busy
machine's noise does not hide a difference of a microsecond:

- ``front_us``: one small keep-alive request through the HTTP/1.1 front's connection
  (``FrontConnection.data_received`` of the whole request, parse, the answer written
  to a stub transport, the connection ready for the next), per request;
- ``count_us``: counting a small plain chat (a repeated system prompt, a new user turn
  each time) with ``ModelCounters.count``, per request; it takes the segment cache's
  lock now.

CPU time of the measuring thread (not wall time: other processes' load does not
count), minimum over ``--repeats`` runs of ``--n`` requests each. ``--baseline TREE`` runs the
same in a subprocess on another checkout's ``TREE/src`` (e.g. the commit before the
change) and prints both.

    python bench/bench_front_path.py [--n 20000] [--repeats 7] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REQUEST = (b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
           b"authorization: Bearer tp-xxxxxxxxxxxxxxxx\r\ncontent-length: 120\r\n\r\n"
           + b"{" + b" " * 118 + b"}")


class StubTransport:
    def __init__(self) -> None:
        self.out = 0

    def write(self, data: bytes) -> None:
        self.out += len(data)

    def writelines(self, parts: list[bytes]) -> None:
        self.out += sum(map(len, parts))

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...


class StubServer:
    max_body = 1 << 22
    keepalive_s = 75.0
    header_timeout_s = 20.0
    body_timeout_s = 20.0
    body_min_rate = 500
    closing = False

    async def serve(self, conn: Any, req: Any) -> None:
        conn.respond(req, 200, {"content-type": "application/json"}, b'{"ok":true}')

    def opened(self, conn: Any) -> None:
        return None

    def closed(self, conn: Any) -> None: ...


async def front_us(n: int, repeats: int) -> float:
    from tokenplane.api.front.protocol import FrontConnection

    best = float("inf")
    for _ in range(repeats):
        conn = FrontConnection(StubServer())  # type: ignore[arg-type]
        conn.connection_made(StubTransport())  # type: ignore[arg-type]
        t0 = time.thread_time()
        for _ in range(n):
            conn.data_received(REQUEST)
            task = conn._task
            if task is not None:
                await task
        best = min(best, time.thread_time() - t0)
        conn.connection_lost(None)
    return 1e6 * best / n


def count_us(n: int, repeats: int) -> float:
    from tokenplane.config.schema import ModelConfig
    from tokenplane.operations.chat import CHAT
    from tokenplane.tokens.model_counters import ModelCounters

    m = ModelConfig(alias="m", tokenizer="cl100k_base", chat_template="llama3",
                    backends=[{"type": "sim"}])  # type: ignore[list-item]
    counters = ModelCounters([m])
    system = {"role": "system", "content": "You are a helpful assistant. " * 8}
    bodies = [{"messages": [system, {"role": "user", "content": f"Say hello, please ({i})."}]}
              for i in range(n)]
    best = float("inf")
    for r in range(repeats):
        if r:  # new turns each run: the user turn misses the cache, the system prompt hits
            bodies = [{"messages": [system, {"role": "user", "content": f"Hi {r} {i}."}]}
                      for i in range(n)]
        t0 = time.thread_time()
        for body in bodies:
            counters.count(m, CHAT, body)
        best = min(best, time.thread_time() - t0)
    return 1e6 * best / n


def measure(n: int, repeats: int) -> dict[str, float]:
    import uvloop

    return {"front_us": round(uvloop.run(front_us(n, repeats)), 2),
            "count_us": round(count_us(n, repeats), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--json", action="store_true", help="print this tree's figures only")
    args = ap.parse_args()
    if args.json:
        print(json.dumps(measure(args.n, args.repeats)))
        return
    out: dict[str, Any] = {}
    trees: dict[str, Path | None] = {"this": None}
    if args.baseline is not None:
        trees["baseline"] = args.baseline / "src"
    for _ in range(2):  # interleaved, twice: the best of both
        for name, src in trees.items():
            env = dict(os.environ)
            if src is not None:
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src),
                                                                  env.get("PYTHONPATH")]))
            done = subprocess.run([sys.executable, __file__, "--json", "--n", str(args.n),
                                   "--repeats", str(args.repeats)], env=env, check=True,
                                  capture_output=True, text=True)
            got = json.loads(done.stdout)
            prev = out.get(name)
            out[name] = got if prev is None else {k: min(v, prev[k]) for k, v in got.items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
