"""BM25 relevance of each document to the user's turn (Okapi BM25, k1 = 1.2,
b = 0.75, Lucene's idf ln(1 + (N - df + 0.5) / (df + 0.5)), never negative). Terms
are units (``context/text.py``) and, for Chinese and Japanese, also the bigrams of
adjacent characters (as Lucene's CJK analyzer does), so a two-character word of the
question counts as a word and not only as two common characters."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tokenplane.context.text import is_cjk, units

K1 = 1.2
B = 0.75
_PAIR = np.int64(0x100000001B3)


def _pairs(h: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    with np.errstate(over="ignore"):
        out: npt.NDArray[np.int64] = h[:-1] * _PAIR + h[1:]
    return out


def bm25_scores(docs: Sequence[npt.NDArray[np.int64]], query: str) -> list[float]:
    """Scores of documents given as arrays of unit hashes (``analysis.Analysis.units``)."""
    n = len(docs)
    qs = units(query)
    if n == 0 or not qs:
        return [0.0] * n
    uni = sorted({hash(u) for u in qs})
    q = np.fromiter((hash(u) for u in qs), np.int64, len(qs))
    cjk = np.fromiter((is_cjk(u) for u in qs), bool, len(qs))
    bi = sorted(set(_pairs(q)[cjk[:-1] & cjk[1:]].tolist())) if len(qs) > 1 else []
    lengths = np.fromiter((len(d) for d in docs), np.float64, n)
    avgdl = float(lengths.mean()) or 1.0
    norm = K1 * (1 - B + B * lengths / avgdl)
    flat = np.concatenate(docs) if n else np.zeros(0, np.int64)
    doc = np.repeat(np.arange(n), lengths.astype(np.int64))
    columns: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], list[int]]] = [
        (flat, doc, uni)]
    if bi and len(flat) > 1:
        same = doc[:-1] == doc[1:]
        columns.append((_pairs(flat)[same], doc[:-1][same], bi))
    rows: list[npt.NDArray[np.float64]] = []
    for values, owner, keys in columns:
        for key in keys:
            rows.append(np.bincount(owner[values == key], minlength=n).astype(np.float64))
    tf = np.stack(rows)
    df = (tf > 0).sum(axis=1)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    scores = (idf[:, None] * tf * (K1 + 1) / (tf + norm[None, :])).sum(axis=0)
    return [float(s) for s in scores]
