"""Cost of agent sessions on the request path, per request, on one core.

* naming the session (headers / metadata checks);
* the tool-output policy on a 10-step agent conversation (10 tool results of about
  1,300 tokens each), measuring only (action ``flag``) and truncating every result to
  256 tokens (``truncate``), with the gateway's segment cache and cut cache (what the
  gateway runs: an agent resends its earlier results, which are cache hits) and
  without them (each result tokenized again);
* cutting one 20,000-token tool result to 2,000 tokens (``head_tail``).

    python bench/bench_sessions.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from tokenplane.config.sessions_schema import ToolOutputConfig
from tokenplane.sessions.ids import session_ref
from tokenplane.sessions.tool_output import CutCache, apply_policy, head_tail
from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache

TOK = TokenizerRegistry().get("tiktoken:cl100k_base")


def tool_result(step: int, rows: int = 40) -> str:
    return json.dumps([{"sku": f"SKU-{step}-{i}", "title": f"Blue kettle model {i}",
                        "price": 20 + i, "stock": i * 3} for i in range(rows)])


def conversation(steps: int = 10) -> list[Any]:
    msgs: list[Any] = [{"role": "system", "content": "You are a shopping agent."},
                       {"role": "user", "content": "Find me a cheap blue kettle."}]
    for s in range(steps):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{s}", "type": "function",
             "function": {"name": "search", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{s}", "content": tool_result(s)})
    return msgs


def per_call_us(fn: Callable[[], Any], rounds: int, n: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    r = args.rounds
    headers = {"x-tokenplane-session": "trip-42", "x-tokenplane-step": "7"}
    body = {"metadata": {"tokenplane_session": "trip-42", "tokenplane_step": "7"}}
    msgs = conversation()
    sizes = [TOK.count(m["content"]) for m in msgs if m.get("role") == "tool"]
    cache = SegmentCache()
    cuts = CutCache()

    def cached(text: str) -> int:
        return cache.count(TOK, text)

    flag = ToolOutputConfig(max_result_tokens=4000, max_growth_tokens=8000)  # type: ignore[call-arg]
    cut = ToolOutputConfig(max_result_tokens=256, action="truncate")  # type: ignore[call-arg]
    big = "\n".join(f"2026-12-02T05:{i % 60:02d}:00Z INFO worker-{i} handled job {i * 7} ok"
                    for i in range(1400))
    rows = [
        ("session_ref (headers)", per_call_us(lambda: session_ref(headers, {}), r, 2000)),
        ("session_ref (metadata)", per_call_us(lambda: session_ref({}, body), r, 2000)),
        (f"policy flag, {len(sizes)} results ~{sum(sizes) // len(sizes)} tok, segment cache",
         per_call_us(lambda: apply_policy(msgs, flag, TOK, cached), r, 200)),
        ("policy flag, no cache",
         per_call_us(lambda: apply_policy(msgs, flag, TOK), r, 20)),
        ("policy truncate to 256, segment cache, no cut cache",
         per_call_us(lambda: apply_policy(msgs, cut, TOK, cached), r, 20)),
        ("policy truncate to 256, segment cache + cut cache (the gateway)",
         per_call_us(lambda: apply_policy(msgs, cut, TOK, cached, cuts), r, 200)),
        (f"head_tail {TOK.count(big)} -> 2000 tokens",
         per_call_us(lambda: head_tail(big, 2000, 0.5, "[... {dropped} ...]", TOK, TOK.count),
                     max(3, r // 5), 3)),
    ]
    for name, us in rows:
        print(f"{name:60s} {us:10.1f} us")


if __name__ == "__main__":
    main()
