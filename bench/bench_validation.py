"""Cost of checking a request body (``Operation.validate``), per request, on one core.

Times the validation of a typical chat body (a system prompt, a few turns, the usual
sampling fields), a chat body with tools and image parts, a completion and an
embeddings body. Run it on two checkouts to compare (``PYTHONPATH=<other>/src``).

    python bench/bench_validation.py [--n 5000]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from tokenplane.operations.chat import CHAT
from tokenplane.operations.completions import COMPLETIONS
from tokenplane.operations.embeddings import EMBEDDINGS

TYPICAL_CHAT: dict[str, Any] = {
    "model": "llama3-8b",
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
    ],
    "temperature": 0.7, "top_p": 0.9, "max_tokens": 256, "stream": True,
    "stream_options": {"include_usage": True}, "user": "u-42",
}
TOOLS_CHAT: dict[str, Any] = {
    **TYPICAL_CHAT,
    "messages": [
        *TYPICAL_CHAT["messages"],
        {"role": "user", "content": [{"type": "text", "text": "and this?"},
                                     {"type": "image_url", "image_url": {"url": "data:x"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
                                                "parameters": {"type": "object"}}}],
    "tool_choice": "auto", "stop": ["\n\n"], "logprobs": True, "top_logprobs": 2,
}
COMPLETION = {"model": "llama3-8b", "prompt": "Once upon a time", "max_tokens": 64,
              "temperature": 0.2, "stop": "\n"}
EMBEDDING = {"model": "embed", "input": ["a", "b", "c"], "encoding_format": "float"}


def per_call_us(fn: Any, body: dict[str, Any], n: int, rounds: int = 30) -> float:
    """The best of ``rounds`` rounds of ``n`` calls, in CPU time of this process (the
    least disturbed by other work on a shared machine)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(n):
            fn(body)
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5_000)
    n = ap.parse_args().n
    for name, fn, body in [("chat, typical", CHAT.validate, TYPICAL_CHAT),
                           ("chat, tools + image", CHAT.validate, TOOLS_CHAT),
                           ("completion", COMPLETIONS.validate, COMPLETION),
                           ("embeddings", EMBEDDINGS.validate, EMBEDDING)]:
        print(f"{name:22s} {per_call_us(fn, body, n):6.2f} us per request")


if __name__ == "__main__":
    main()
