"""What the Messages dialect adds to a request, in process (issue 26); prints JSON.

On ``bench_gateway.py``'s prompt and its mock upstream's answers: ``to_chat`` of the
Messages body (the edge's translation), the non-stream answer rendered as a Messages
answer (``AnthropicDialect.answer``), and the 64-token canonical stream rendered as
Messages events (``AnthropicDialect.stream``), against a pass-through generator over the
same events (what the Chat path does with them). Process CPU microseconds per request,
the median over ``--runs`` runs of ``--n`` requests each.

    python bench/bench_messages_render.py [--runs 7] [--n 300]

Run it from another tree (``PYTHONPATH=TREE/src``) for a before / after of a change.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mock_upstream
from bench_gateway import messages_bodies
from tokenplane.dialects.anthropic.edge import ANTHROPIC
from tokenplane.dialects.anthropic.request import to_chat
from tokenplane.dialects.base import AnswerInfo

USAGE = b"data: " + orjson.dumps({
    "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": "mock",
    "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 64,
                             "total_tokens": 84}}) + b"\n\n"
EVENTS = ([mock_upstream.chunk(" word") for _ in range(63)]
          + [mock_upstream.chunk(" word", "length"), USAGE, b"data: [DONE]\n\n"])
INFO = AnswerInfo("m", "req_0123456789", 20)


async def _events() -> AsyncIterator[bytes]:
    for e in EVENTS:
        yield e


async def _render() -> int:
    n = 0
    async for b in ANTHROPIC.stream(_events(), INFO):
        n += len(b)
    return n


async def _relay() -> int:
    n = 0
    async for b in _events():
        n += len(b)
    return n


def _per_request_us(fn: Callable[[int], Any], n: int) -> float:
    t = time.process_time()
    fn(n)
    return 1e6 * (time.process_time() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    raws = messages_bodies(False)
    bodies = [orjson.loads(next(raws)) for _ in range(args.n)]
    loop = asyncio.new_event_loop()

    def translate(n: int) -> None:
        for b in bodies[:n]:
            to_chat(b)

    def answer(n: int) -> None:
        for _ in range(n):
            ANTHROPIC.answer(mock_upstream.ANSWER, INFO)

    def stream(n: int) -> None:
        for _ in range(n):
            loop.run_until_complete(_render())

    def relay(n: int) -> None:
        for _ in range(n):
            loop.run_until_complete(_relay())

    figures: dict[str, list[float]] = {"to_chat": [], "answer": [], "stream_64": [],
                                       "relay_64": []}
    for _ in range(args.runs):  # interleaved
        figures["to_chat"].append(_per_request_us(translate, args.n))
        figures["answer"].append(_per_request_us(answer, args.n))
        figures["stream_64"].append(_per_request_us(stream, args.n))
        figures["relay_64"].append(_per_request_us(relay, args.n))
    loop.close()
    out = {"bench": "messages_render", "runs": args.runs, "n": args.n,
           "us_per_request": {k: round(statistics.median(v), 2) for k, v in figures.items()},
           "range": {k: [round(min(v), 2), round(max(v), 2)] for k, v in figures.items()}}
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
