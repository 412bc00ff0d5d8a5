"""RAG context packing (issue 16's figure: 50 chunks of 400 tokens into a 4k budget,
p50 under 2 ms). Times ``ContextPacker.pack`` on one core with exact counts (the
gateway's per-alias counter: tokenizer + segment cache):

- cold: fresh chunks every call (each chunk's text made new by a per-call prefix, so
  neither the segment cache nor the analysis cache has seen it: RAG's real case, new
  chunks per request; the tokenizer's word memo, ``tokens/word_counts.py``, has seen
  their words, as it has in a gateway that has served the corpus before);
- cold, new words: the same, with the word memo emptied before every call (the first
  requests of a gateway, or a corpus of words never seen);
- warm: the same chunks every call (both caches hold them).

Before and after, alternating call by call in one run (the box is shared and noisy):

- before: the packer *and the tokenizers* as of ``--before-ref`` (default: the main
  branch this work started from), read with ``git archive`` into a package of their
  own (``tokenplane_before``), so the before side runs the old counting, BM25 and
  analysis code; as the chat path called it then: ``pack(floor=..., defer=True)``;
- after (decision): ``pack(floor=..., defer=True, joins=...)`` as the chat path calls
  it now; what the request waits for;
- settle: ``Packed.settle()``, the rest of the exact accounting, which the gateway runs
  on a worker thread while the upstream answers (not on the request's path).

The after side runs the compiled kernels where they were built (docs/ARCHITECTURE.md,
"Compiled kernels"; the header says which); ``TOKENPLANE_NO_KERNELS=1`` runs it on the
pure-Python code instead. ``--before-ref`` names any commit (the before side is always
that commit's Python: ``git archive`` carries no built extension).

Medians and p95s of the wall clock and of the thread's CPU time (what a loaded
machine's scheduler does not inflate); the load average is printed. Chunks are the
project's own docs (docs/*.md) cut into 400-token chunks (whole sentences, at least 400
tokens), 50 per call; the query is a question about them; the documents carry no scores
(BM25 ranks them) unless ``scores``. Every call's decision is checked equal on both
sides (text, tokens, kept, citations) and, settled, the whole accounting.

    python bench/bench_context_pack.py [--n 200] [--tokenizer tiktoken:cl100k_base]
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tokenplane.context import unit_kernels
from tokenplane.context.analysis import AnalysisCache
from tokenplane.context.documents import Document
from tokenplane.context.packer import ContextPacker
from tokenplane.tokens import word_kernels
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.cached_splits import CachedSplits
from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache

ROOT = Path(__file__).resolve().parents[1]
QUERY = "How does admission reserve tokens and settle budgets when a stream ends early?"
BUDGET = 4000
# main as issue 16's cold-path work started from it (the packer counting lazily, the
# block counted whole, BM25 from a Counter per text, tokenizing every new text)
BEFORE_REF = "746d678"
KEYS = ("cold_before", "cold_after", "cold_new_words", "settle", "warm_before", "warm_after")


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


def before_modules(ref: str) -> SimpleNamespace | None:
    """``tokenplane/context`` and ``tokenplane/tokens`` of ``ref`` as a package of their
    own, ``tokenplane_before`` (their imports of each other rewritten), so the before
    side runs that commit's packer, BM25, analysis and tokenizers; None when git
    cannot give them."""
    try:
        tar = subprocess.run(["git", "archive", ref, "src/tokenplane/context",
                              "src/tokenplane/tokens"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    root = Path(tempfile.mkdtemp())
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(root, filter="data")
    package = root / "tokenplane_before"
    (root / "src" / "tokenplane").rename(package)
    (package / "__init__.py").write_text("", encoding="utf-8")
    for path in package.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"\btokenplane\.", "tokenplane_before.", source),
                        encoding="utf-8")
    sys.path.insert(0, str(root))
    names = {"packer": "context.packer", "analysis": "context.analysis",
             "registry": "tokens.registry", "segments": "tokens.segments"}
    mods = {k: importlib.import_module(f"tokenplane_before.{v}") for k, v in names.items()}
    return SimpleNamespace(ContextPacker=mods["packer"].ContextPacker,
                           AnalysisCache=mods["analysis"].AnalysisCache,
                           TokenizerRegistry=mods["registry"].TokenizerRegistry,
                           SegmentCache=mods["segments"].SegmentCache)


def _timed(fn: Callable[[], Any], wall: list[float], cpu: list[float]) -> Any:
    c0, t0 = time.thread_time(), time.perf_counter()
    out = fn()
    wall.append(time.perf_counter() - t0)
    cpu.append(time.thread_time() - c0)
    return out


def _counting(tok: Any, cache: Any) -> tuple[Callable[[str], int], Callable[..., int]]:
    """``count`` and ``floor`` as ``ModelCounters.count_text`` / ``floor_text`` give
    them: through the segment cache; the cached count, else the tokenizer's floor (the
    before side's takes no ``above``)."""
    piece: Callable[..., int] = getattr(tok, "token_floor", lambda t, *above: 0)

    def count(t: str) -> int:
        n: int = cache.count(tok, t)
        return n

    def floor(t: str, *above: int) -> int:
        known = cache.peek(tok, t)
        return known if known is not None else piece(t, *above)

    return count, floor


def _decision(p: Any) -> tuple[Any, ...]:
    return (p.text, p.tokens, [(k.id, k.marker, k.tokens, k.truncated) for k in p.kept],
            p.citations)


def _accounting(p: Any) -> tuple[Any, ...]:
    return (sorted((d.id, d.reason, d.tokens, d.of) for d in p.dropped), p.offered_tokens)


def run(spec: str, n: int, scores: bool, before: SimpleNamespace | None) -> dict[str, float]:
    tok = TokenizerRegistry().get(spec)
    texts = chunks(tok, 400, 50)

    def docs_for(prefix: str) -> list[Document]:
        return [Document(f"c{i}", prefix + t, score=float(i % 7) if scores else None)
                for i, t in enumerate(texts)]

    # cold and warm calls have segment caches of their own (the cold ones' new chunks
    # would push the warm chunks out of a shared one, by a different amount each side)
    segments, warm_segments = SegmentCache(), SegmentCache()
    count, floor = _counting(tok, segments)
    wcount, wfloor = _counting(tok, warm_segments)
    splits = getattr(tok, "space_splits", False)
    # as ModelCounters.joins gives it: the tokenizer with the segment cache
    joins = CachedSplits(tok, tok, segments) if splits else None  # type: ignore[arg-type]
    wjoins = CachedSplits(tok, tok, warm_segments) if splits else None  # type: ignore[arg-type]
    forget: Callable[[], None] = getattr(tok, "forget_words", lambda: None)
    warm_docs = docs_for("")
    after = ContextPacker()
    ref = after.pack(QUERY, warm_docs, BUDGET, wcount)
    assert ref.tokens <= BUDGET and ref.offered_tokens == ref.kept_tokens + ref.dropped_tokens
    old = bcount = bfloor = bwcount = bwfloor = None
    if before is not None:
        btok = before.TokenizerRegistry().get(spec)
        bcount, bfloor = _counting(btok, before.SegmentCache())
        bwcount, bwfloor = _counting(btok, before.SegmentCache())
        old = before.ContextPacker()
        assert _decision(old.pack(QUERY, warm_docs, BUDGET, bwcount)) == _decision(ref)
    m: dict[str, list[float]] = {k + x: [] for k in KEYS for x in ("", "_cpu")}
    for k in range(n):
        # cold: chunks no cache has seen (a new prefix each call), fresh packers; each
        # side has caches of its own, so the same chunks are new to both
        fresh = docs_for(f"({k}) ")
        a = ContextPacker(cache=AnalysisCache())
        packed = _timed(lambda a=a, d=fresh: a.pack(QUERY, d, BUDGET, count, floor=floor,
                                                     defer=True, joins=joins),
                        m["cold_after"], m["cold_after_cpu"])
        if old is not None and before is not None:
            b = before.ContextPacker(cache=before.AnalysisCache())
            was = _timed(lambda b=b, d=fresh: b.pack(QUERY, d, BUDGET, bcount, floor=bfloor,
                                                     defer=True),
                         m["cold_before"], m["cold_before_cpu"])
            assert _decision(was) == _decision(packed)
            was.settle()
        _timed(packed.settle, m["settle"], m["settle_cpu"])
        assert packed.tokens <= BUDGET
        assert packed.offered_tokens == packed.kept_tokens + packed.dropped_tokens
        if old is not None:
            assert _accounting(was) == _accounting(packed)
        # cold, and the words new too (the memo emptied first)
        forget()
        newer = docs_for(f"[{k}] ")
        a = ContextPacker(cache=AnalysisCache())
        _timed(lambda a=a, d=newer: a.pack(QUERY, d, BUDGET, count, floor=floor, defer=True,
                                           joins=joins),
               m["cold_new_words"], m["cold_new_words_cpu"]).settle()  # (words known again)
        if old is not None:
            _timed(lambda: old.pack(QUERY, warm_docs, BUDGET, bwcount, floor=bwfloor,
                                    defer=True), m["warm_before"], m["warm_before_cpu"])
        _timed(lambda: after.pack(QUERY, warm_docs, BUDGET, wcount, floor=wfloor, defer=True,
                                  joins=wjoins), m["warm_after"], m["warm_after_cpu"])
    out: dict[str, float] = {"offered": ref.offered_tokens, "kept": len(ref.kept),
                             "tokens": ref.tokens}
    for key, values in m.items():
        out[key] = statistics.median(values) * 1e3 if values else float("nan")
        if key.startswith("cold") and len(values) > 1:
            out[key + "_p95"] = statistics.quantiles(values, n=20)[18] * 1e3
    return out


def breakdown(spec: str, n: int, scores: bool) -> dict[str, float]:
    """Where the cold decision's CPU goes: mean thread CPU per pack (ms) of each part,
    timed by wrapping it (the outermost timed call counts; ``other`` is the rest)."""
    import tokenplane.context.packer as packer_mod

    tok = TokenizerRegistry().get(spec)
    texts = chunks(tok, 400, 50)
    spent: dict[str, float] = {}
    depth = [0]

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kw: Any) -> Any:
            if depth[0]:
                return fn(*args, **kw)
            depth[0] += 1
            c0 = time.thread_time()
            try:
                return fn(*args, **kw)
            finally:
                spent[name] = spent.get(name, 0.0) + time.thread_time() - c0
                depth[0] -= 1
        return wrapper

    segments = SegmentCache()
    count, floor = _counting(tok, segments)
    joins = CachedSplits(tok, tok, segments)  # type: ignore[arg-type]
    patched = {"query_counts": packer_mod.query_counts, "bm25_scores": packer_mod.bm25_scores,
               "block_tokens": packer_mod.block_tokens}
    get, near = AnalysisCache.get, packer_mod._KeptSignatures.near
    try:
        for name, fn in patched.items():
            setattr(packer_mod, name, timed(name, fn))
        AnalysisCache.get = timed("analyses (MinHash)", get)  # type: ignore[method-assign]
        packer_mod._KeptSignatures.near = timed("near-duplicate estimates", near)  # type: ignore[method-assign]
        tcount, tfloor = timed("exact counts", count), timed("floors", floor)
        total = 0.0
        for k in range(n + 1):
            docs = [Document(f"c{i}", f"({k}) " + t, score=float(i % 7) if scores else None)
                    for i, t in enumerate(texts)]
            if k == 0:  # (the words' first sight, not measured)
                ContextPacker().pack(QUERY, docs, BUDGET, count, floor=floor, joins=joins)
                spent.clear()
                continue
            a = ContextPacker(cache=AnalysisCache())
            c0 = time.thread_time()
            a.pack(QUERY, docs, BUDGET, tcount, floor=tfloor, defer=True, joins=joins)
            total += time.thread_time() - c0
    finally:
        for name, fn in patched.items():
            setattr(packer_mod, name, fn)
        AnalysisCache.get = get  # type: ignore[method-assign]
        packer_mod._KeptSignatures.near = near  # type: ignore[method-assign]
    out = {k: v / n * 1e3 for k, v in sorted(spent.items(), key=lambda kv: -kv[1])}
    out["other (the walk, the cut, laying out)"] = (total - sum(spent.values())) / n * 1e3
    out["total"] = total / n * 1e3
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
    ap.add_argument("--breakdown", action="store_true",
                    help="where the cold decision's CPU goes, part by part")
    args = ap.parse_args()
    specs = args.tokenizer or ["tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct"]
    if args.breakdown:
        print(f"load average: {os.getloadavg()[0]:.2f}; mean thread CPU per cold "
              "decision, ms")
        for spec in specs:
            for scores in (False, True):
                parts = breakdown(spec, args.n, scores)
                print(f"\n{spec}, {'scores' if scores else 'BM25'}:")
                for name, ms in parts.items():
                    print(f"  {name:40s} {ms:6.3f}")
        return
    before = before_modules(args.before_ref)
    print(f"load average at the start: {os.getloadavg()[0]:.2f}; after: "
          + ("the compiled kernels" if unit_kernels.COMPILED and word_kernels.COMPILED
             else "pure Python (no compiled kernels)") + f"; before: {args.before_ref}")
    print("wall / thread CPU, ms: p50, and p95 for the cold decision; after = the "
          "decision (pack(defer=True)); settle = the deferred accounting (off the "
          "request's path)\n")
    print("| tokenizer | ranking | offered | kept docs | block tokens | cold before p50 "
          "| cold before p95 | cold after p50 | cold after p95 | cold, new words p50 "
          "| settle | warm before | warm after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for spec in specs:
        for scores in (False, True):
            r = run(spec, args.n, scores, before)

            def pair(key: str, r: dict[str, float] = r) -> str:
                return f"{r[key]:.2f} / {r[key + '_cpu']:.2f}"

            def p95(key: str, r: dict[str, float] = r) -> str:
                return f"{r.get(key + '_p95', float('nan')):.2f} / " \
                       f"{r.get(key + '_cpu_p95', float('nan')):.2f}"

            print(f"| {spec} | {'scores' if scores else 'BM25'} | {r['offered']:,.0f} "
                  f"| {r['kept']:.0f} | {r['tokens']:,.0f} | {pair('cold_before')} "
                  f"| {p95('cold_before')} | {pair('cold_after')} | {p95('cold_after')} "
                  f"| {pair('cold_new_words')} | {pair('settle')} | {pair('warm_before')} "
                  f"| {pair('warm_after')} |", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    print(f"context stage on a chat without the extension: {stage_cost_us():.2f} us")


if __name__ == "__main__":
    main()
