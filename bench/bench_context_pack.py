"""RAG context packing (issue 16's figure: 50 chunks of 400 tokens into a 4k budget,
p50 under 2 ms). Times ``ContextPacker.pack`` on one core with exact counts (the
gateway's per-alias counter: tokenizer + segment cache):

- warm: the chunks were seen before (segment cache and analysis cache hold them; the
  steady state of a RAG service whose corpus chunks recur across questions);
- cold: fresh caches every call (every chunk counted and analysed from scratch).

Wall-clock percentiles, and the p50 of the thread's CPU time (what a loaded machine's
scheduler does not inflate).

Chunks are the project's own docs (docs/*.md) cut into 400-token chunks (whole
sentences, at least 400 tokens), 50 per call; the query is a question about them; the
documents carry no scores (BM25 ranks them) unless ``scores``.

    python bench/bench_context_pack.py [--n 300] [--tokenizer tiktoken:cl100k_base]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from tokenplane.context.analysis import AnalysisCache
from tokenplane.context.documents import Document
from tokenplane.context.packer import ContextPacker
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache

ROOT = Path(__file__).resolve().parents[1]
QUERY = "How does admission reserve tokens and settle budgets when a stream ends early?"


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


def run(spec: str, n: int, scores: bool) -> dict[str, float]:
    tok = TokenizerRegistry().get(spec)
    texts = chunks(tok, 400, 50)
    docs = [Document(f"c{i}", t, score=float(i % 7) if scores else None)
            for i, t in enumerate(texts)]
    cache = SegmentCache()
    packer = ContextPacker()

    def count(t: str) -> int:
        return cache.count(tok, t)

    packed = packer.pack(QUERY, docs, 4000, count)
    assert packed.tokens <= 4000
    warm: list[float] = []
    warm_cpu: list[float] = []
    for _ in range(n):
        c0, t0 = time.thread_time(), time.perf_counter()
        packer.pack(QUERY, docs, 4000, count)
        warm.append(time.perf_counter() - t0)
        warm_cpu.append(time.thread_time() - c0)
    cold: list[float] = []
    for _ in range(max(n // 10, 10)):
        fresh = SegmentCache()
        cold_packer = ContextPacker(cache=AnalysisCache())
        t0 = time.perf_counter()
        cold_packer.pack(QUERY, docs, 4000, lambda t, c=fresh: c.count(tok, t))  # type: ignore[misc]
        cold.append(time.perf_counter() - t0)
    q = statistics.quantiles
    return {"offered": packed.offered_tokens, "kept": len(packed.kept),
            "tokens": packed.tokens,
            "warm_cpu_p50": statistics.median(warm_cpu) * 1e3,
            "warm_p50": statistics.median(warm) * 1e3, "warm_p95": q(warm, n=20)[18] * 1e3,
            "cold_p50": statistics.median(cold) * 1e3, "cold_p95": q(cold, n=20)[18] * 1e3}


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
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--tokenizer", action="append")
    args = ap.parse_args()
    specs = args.tokenizer or ["tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct"]
    print("| tokenizer | ranking | offered | kept docs | block tokens | warm p50 | warm p95 "
          "| warm p50 CPU | cold p50 | cold p95 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for spec in specs:
        for scores in (False, True):
            r = run(spec, args.n, scores)
            print(f"| {spec} | {'scores' if scores else 'BM25'} | {r['offered']:,.0f} "
                  f"| {r['kept']:.0f} | {r['tokens']:,.0f} | {r['warm_p50']:.2f} ms "
                  f"| {r['warm_p95']:.2f} ms | {r['warm_cpu_p50']:.2f} ms "
                  f"| {r['cold_p50']:.2f} ms "
                  f"| {r['cold_p95']:.2f} ms |")
    print(f"\ncontext stage on a chat without the extension: {stage_cost_us():.2f} us")


if __name__ == "__main__":
    main()
