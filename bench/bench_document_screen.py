"""The RAG documents' injection screen (docs/GOVERNANCE.md, "Retrieved documents"):
CPU time to score 50 chunks of 400 tokens as retrieved context, cold (new chunks
every call: a per-call prefix makes each text new) and warm (the same chunks again,
answered by the verdict cache), on two corpora:

- docs: the project's own docs/*.md cut into chunks (typographic punctuation and
  Chinese: the screen normalises every chunk; they also talk about prompt injection,
  so the rules' literals occur: the slow end);
- neutral: sentences of the same docs in which none of the rules' required literals
  occurs, joined into chunks of the same size (prose that says nothing the rules look
  for: the common case; only the prefilter and, for text that is not plain ASCII,
  the normalisation run).

Baseline in the same run: the packer's own decision on the same chunks (``pack``
with ``defer``, as the chat path calls it).

    python bench/bench_document_screen.py [--n 20]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_context_pack import QUERY, ROOT, chunks
from tokenplane.context.documents import Document
from tokenplane.context.packer import ContextPacker
from tokenplane.governance.injection.cached import CachedDetector
from tokenplane.governance.injection.detector import HeuristicDetector
from tokenplane.governance.injection.rules import ALL_RULES
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.registry import TokenizerRegistry


def _screen_ms(detector: CachedDetector, texts: list[str]) -> float:
    start = time.thread_time()
    for t in texts:
        detector.score(t, "context")
    return (time.thread_time() - start) * 1e3


def _pack_ms(tok: Tokenizer, docs: list[Document]) -> float:
    start = time.thread_time()
    ContextPacker().pack(QUERY, docs, 4000, tok.count,
                         floor=tok.token_floor, defer=True)  # type: ignore[attr-defined]
    return (time.thread_time() - start) * 1e3


def neutral(corpus: list[str]) -> list[str]:
    """As many chunks as ``corpus``, as long as its, of the docs' sentences that hold
    no literal a rule needs."""
    literals = {lit for r in ALL_RULES if r.literals for lit in r.literals}
    size = sum(len(t) for t in corpus) // len(corpus)
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))
    out: list[str] = []
    cur: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)):
        if len(out) == len(corpus):
            break
        folded = sentence.lower()
        if any(lit in folded for lit in literals):
            continue
        cur.append(sentence)
        if len(" ".join(cur)) >= size:
            out.append(" ".join(cur))
            cur = []
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    tok = TokenizerRegistry().get("tiktoken:cl100k_base")
    docs_corpus = chunks(tok, 400, 50)
    inner = HeuristicDetector()
    for name, corpus in (("docs", docs_corpus), ("neutral", neutral(docs_corpus))):
        cached = CachedDetector(inner)
        cold, warm, pack = [], [], []
        for i in range(args.n):
            texts = [f"{i}-{j} {t}" for j, t in enumerate(corpus)]
            cold.append(_screen_ms(cached, texts))
            warm.append(_screen_ms(cached, texts))
            pack.append(_pack_ms(tok, [Document(f"d{j}", f"{i}-{j}p {t}")
                                       for j, t in enumerate(corpus)]))
        kb = sum(len(t.encode()) for t in corpus) / 1024
        print(f"{name}: {len(corpus)} chunks, {kb:.0f} KB; CPU ms p50: screen cold "
              f"{statistics.median(cold):.2f}, warm {statistics.median(warm):.2f}; "
              f"packer decision (baseline) {statistics.median(pack):.2f}")


if __name__ == "__main__":
    main()
