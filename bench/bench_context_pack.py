"""RAG context packing (issue 16's figure: 50 chunks of 400 tokens into a 4k budget,
p50 under 2 ms). Times ``ContextPacker.pack`` on one core with exact counts (the
gateway's per-alias counter: tokenizer + segment cache):

- cold: fresh chunks every call (each chunk's text made new by a per-call prefix, so
  neither the segment cache nor the analysis cache has seen it: RAG's real case, new
  chunks per request);
- warm: the same chunks every call (both caches hold them).

Before and after, alternating call by call in one run (the box is shared and noisy):

- before: the packer as of ``--before-ref`` (default: the commit before it counted
  lazily, read with ``git show``):
  every document counted and analysed up front;
- after (decision): ``pack(floor=..., defer=True)`` as the chat path calls it: only
  the documents the decision needs are counted and analysed; what the request waits
  for;
- after (settle): ``Packed.settle()``, the rest of the exact accounting, which the
  gateway runs on a worker thread while the upstream answers (not on the request's
  path).

Wall-clock medians, and the median of the thread's CPU time (what a loaded machine's
scheduler does not inflate). Chunks are the project's own docs (docs/*.md) cut into
400-token chunks (whole sentences, at least 400 tokens), 50 per call; the query is a
question about them; the documents carry no scores (BM25 ranks them) unless ``scores``.

    python bench/bench_context_pack.py [--n 200] [--tokenizer tiktoken:cl100k_base]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenplane.context.analysis import AnalysisCache
from tokenplane.context.documents import Document
from tokenplane.context.packer import ContextPacker
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache

ROOT = Path(__file__).resolve().parents[1]
QUERY = "How does admission reserve tokens and settle budgets when a stream ends early?"
BUDGET = 4000
# the packer before it counted lazily (issue 16's cold path): the merge of i16-context
BEFORE_REF = "1a3e3fd"


def chunks(tok: Tokenizer, size: int, count: int) -> list[str]:
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))
    sentences = re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text))
    out: list[str] = []
    cur: list[str] = []
    for s in sentences:
        cur.append(s)
        if tok.count(" ".join(cur)) >= size:
            out.append(" ".join(cur))
            cur = []
            if len(out) == count:
                break
    assert len(out) == count, "the docs are too short for this many chunks"
    return out


def before_packer(ref: str) -> Any:
    """The ``ContextPacker`` class of ``ref`` (None when git cannot give it)."""
    try:
        src = subprocess.run(["git", "show", f"{ref}:src/tokenplane/context/packer.py"],
                             cwd=ROOT, capture_output=True, check=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "packer_before.py"
    path.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("packer_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["packer_before"] = mod
    spec.loader.exec_module(mod)
    return mod.ContextPacker


def _timed(fn: Callable[[], Any], wall: list[float], cpu: list[float]) -> Any:
    c0, t0 = time.thread_time(), time.perf_counter()
    out = fn()
    wall.append(time.perf_counter() - t0)
    cpu.append(time.thread_time() - c0)
    return out


def run(spec: str, n: int, scores: bool, before_cls: Any) -> dict[str, float]:
    tok = TokenizerRegistry().get(spec)
    piece: Callable[[str], int] = getattr(tok, "token_floor", lambda t: 0)
    texts = chunks(tok, 400, 50)

    def docs_for(prefix: str) -> list[Document]:
        return [Document(f"c{i}", prefix + t, score=float(i % 7) if scores else None)
                for i, t in enumerate(texts)]

    cache = SegmentCache()

    def count(t: str) -> int:
        return cache.count(tok, t)

    def floor(t: str) -> int:  # as ModelCounters.floor_text: the cached count, else
        known = cache.peek(tok, t)
        return known if known is not None else piece(t)

    warm_docs = docs_for("")
    after, before = ContextPacker(), before_cls() if before_cls else None
    ref = after.pack(QUERY, warm_docs, BUDGET, count)
    assert ref.tokens <= BUDGET and ref.offered_tokens == ref.kept_tokens + ref.dropped_tokens
    if before is not None:
        old = before.pack(QUERY, warm_docs, BUDGET, count)
        assert (old.text, old.dropped, old.offered_tokens) == (ref.text, ref.dropped,
                                                              ref.offered_tokens)
    m: dict[str, list[float]] = {k: [] for k in (
        "cold_before", "cold_before_cpu", "cold_after", "cold_after_cpu", "settle",
        "settle_cpu", "warm_before", "warm_before_cpu", "warm_after", "warm_after_cpu")}
    for k in range(n):
        # cold: chunks no cache has seen (a new prefix each call), fresh packers
        fresh = docs_for(f"({k}) ")
        if before is not None:
            b = before_cls(cache=AnalysisCache())
            _timed(lambda b=b, d=fresh: b.pack(QUERY, d, BUDGET, count), m["cold_before"],
                   m["cold_before_cpu"])
            fresh = docs_for(f"({k}') ")  # the one just packed is warm now
        a = ContextPacker(cache=AnalysisCache())
        packed = _timed(lambda a=a, d=fresh: a.pack(QUERY, d, BUDGET, count, floor=floor,
                                                     defer=True),
                        m["cold_after"], m["cold_after_cpu"])
        _timed(packed.settle, m["settle"], m["settle_cpu"])
        assert packed.tokens <= BUDGET
        assert packed.offered_tokens == packed.kept_tokens + packed.dropped_tokens
        if before is not None:
            _timed(lambda: before.pack(QUERY, warm_docs, BUDGET, count), m["warm_before"],
                   m["warm_before_cpu"])
        _timed(lambda: after.pack(QUERY, warm_docs, BUDGET, count, floor=floor, defer=True),
               m["warm_after"], m["warm_after_cpu"])
    out: dict[str, float] = {"offered": ref.offered_tokens, "kept": len(ref.kept),
                             "tokens": ref.tokens}
    for key, values in m.items():
        out[key] = statistics.median(values) * 1e3 if values else float("nan")
    out["cold_after_p95"] = statistics.quantiles(m["cold_after"], n=20)[18] * 1e3
    return out


def stage_cost_us(n: int = 20_000) -> float:
    """The context stage on a chat without the extension (every request pays it)."""
    import asyncio

    from tokenplane.config.context_schema import ContextConfig
    from tokenplane.config.schema import ModelConfig
    from tokenplane.operations.chat import CHAT
    from tokenplane.pipeline.context import RequestContext
    from tokenplane.pipeline.context_stage import ContextStage
    from tokenplane.tokens.model_counters import ModelCounters

    model = ModelConfig.model_validate({"alias": "m", "backends": [{"type": "sim"}]})
    stage = ContextStage(ModelCounters([model]), ContextConfig.model_validate({}))
    body = {"model": "m", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"}]}

    async def loop() -> float:
        ctxs = [RequestContext("r", CHAT.path, CHAT, b"", {}, body=body) for _ in range(n)]
        t0 = time.perf_counter()
        for ctx in ctxs:
            await stage.run(ctx)
        return (time.perf_counter() - t0) / n * 1e6

    return asyncio.run(loop())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--tokenizer", action="append")
    ap.add_argument("--before-ref", default=BEFORE_REF)
    args = ap.parse_args()
    specs = args.tokenizer or ["tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct"]
    before_cls = before_packer(args.before_ref)
    print("medians (wall / thread CPU), ms; after = the decision (pack(defer=True)), "
          "settle = the deferred accounting (off the request's path)\n")
    print("| tokenizer | ranking | offered | kept docs | block tokens | cold before "
          "| cold after | cold after p95 | settle | warm before | warm after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for spec in specs:
        for scores in (False, True):
            r = run(spec, args.n, scores, before_cls)

            def pair(key: str, r: dict[str, float] = r) -> str:
                return f"{r[key]:.2f} / {r[key + '_cpu']:.2f}"

            print(f"| {spec} | {'scores' if scores else 'BM25'} | {r['offered']:,.0f} "
                  f"| {r['kept']:.0f} | {r['tokens']:,.0f} | {pair('cold_before')} "
                  f"| {pair('cold_after')} | {r['cold_after_p95']:.2f} | {pair('settle')} "
                  f"| {pair('warm_before')} | {pair('warm_after')} |")
    print(f"\ncontext stage on a chat without the extension: {stage_cost_us():.2f} us")


if __name__ == "__main__":
    main()
