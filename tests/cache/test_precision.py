"""The semantic cache's precision on the labelled paraphrase set (English and
Chinese, hits and near misses), with the real embedding model: at the shipped
threshold, at least 0.95 of the pairs it would serve from the cache are true
paraphrases. Recall is reported by bench/bench_cache.py (docs/BENCHMARKS.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tokenplane.cache.keys import comparable, numbers
from tokenplane.config.cache_schema import SHIPPED_THRESHOLD, CacheConfig
from tokenplane.embeddings.model import UseEmbedder

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "paraphrases.tsv"


def load() -> list[tuple[str, int, str, str]]:
    rows = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            lang, label, a, b = line.split("\t")
            rows.append((lang, int(label), a, b))
    return rows


def test_the_set_is_big_enough_and_bilingual() -> None:
    rows = load()
    assert len(rows) >= 300
    for lang in ("en", "zh"):
        labels = [r[1] for r in rows if r[0] == lang]
        assert labels.count(1) >= 70 and labels.count(0) >= 70


def test_precision_at_the_shipped_threshold() -> None:
    assert CacheConfig().semantic.threshold == SHIPPED_THRESHOLD
    rows = load()
    emb = UseEmbedder()
    a = emb.embed([comparable(r[2]) for r in rows])
    b = emb.embed([comparable(r[3]) for r in rows])
    assert a.dtype == np.float32 and a.shape == (len(rows), emb.dim)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-4)
    scores = (a * b).sum(axis=1)
    labels = np.array([r[1] for r in rows])
    # numbers written in digits are part of the partition: unequal ones never meet
    same_numbers = np.array([numbers(comparable(r[2])) == numbers(comparable(r[3]))
                             for r in rows])
    served = (scores >= SHIPPED_THRESHOLD) & same_numbers
    true_hits = int((served & (labels == 1)).sum())
    precision = true_hits / max(1, int(served.sum()))
    assert precision >= 0.95, precision
    assert true_hits >= 0.3 * int((labels == 1).sum())  # it does serve paraphrases
    for lang in ("en", "zh"):  # both languages are served
        mine = np.array([r[0] == lang for r in rows])
        assert int((served & (labels == 1) & mine).sum()) > 0
    # the number guard is what keeps "top 3" from "top 5": without it, near misses
    # that differ only in a number would be served
    unguarded = scores >= SHIPPED_THRESHOLD
    assert int((unguarded & (labels == 0) & ~same_numbers).sum()) > 0
