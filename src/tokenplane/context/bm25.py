"""BM25 relevance of each document to the user's turn (Okapi BM25, k1 = 1.2,
b = 0.75, Lucene's idf ln(1 + (N - df + 0.5) / (df + 0.5)), never negative). Terms
are units (``context/text.py``) and, for Chinese and Japanese, also the bigrams of
adjacent characters (as Lucene's CJK analyzer does), so a two-character word of the
question counts as a word and not only as two common characters."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tokenplane.context.query_counts import QueryCounts
from tokenplane.context.text import is_cjk, units
from tokenplane.context.unit_kernels import hash_units

K1 = 1.2
B = 0.75
_PAIR = np.int64(0x100000001B3)


def _pairs(h: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    with np.errstate(over="ignore"):
        out: npt.NDArray[np.int64] = h[:-1] * _PAIR + h[1:]
    return out


def _tf(values: npt.NDArray[np.int64], starts: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.float64], keys: npt.NDArray[np.int64],
        mask: npt.NDArray[np.bool_] | None = None) -> npt.NDArray[np.float64]:
    """Occurrences of each key in each document: one vectorised comparison of every
    position with every key, summed over each document's slice."""
    eq = values[None, :] == keys[:, None]
    if mask is not None:
        eq &= mask[None, :]
    counts = np.zeros((len(keys), len(starts)))
    # documents with a position in ``values`` (an empty one's start is the next one's,
    # or the end; so is that of a last one-unit document among pairs)
    full = (lengths > 0) & (starts < len(values))
    if full.any():
        counts[:, full] = np.add.reduceat(eq.astype(np.int32), starts[full], axis=1)
    return counts


def ascii_terms(text: str) -> Counter[str] | None:
    """An ASCII text's units counted (``Counter``: C speed, no hashing to numpy);
    None for other text."""
    if not text.isascii():
        return None
    return Counter(units(text))


Terms = npt.NDArray[np.int64] | Counter[str] | QueryCounts


def bm25_scores(docs: Sequence[Terms], query: str) -> list[float]:
    """Scores of documents given as arrays of unit hashes (``analysis.Analysis.units``)
    or, for ASCII texts, as :func:`ascii_terms`, or, for texts with no Chinese or
    Japanese character, as ``query_counts.QueryCounts`` for this query (the same
    scores, collisions of 64-bit hashes aside: such a text has no character bigram)."""
    n = len(docs)
    qs = units(query)
    if n == 0 or not qs:
        return [0.0] * n
    q = hash_units(qs)  # (as the documents' unit hashes are made)
    keyed = sorted(set(zip(q.tolist(), qs, strict=True)))  # (the rows by their hashes)
    uni = [h for h, _ in keyed]
    cjk = [is_cjk(u) for u in qs]
    at = [k for k in range(len(qs) - 1) if cjk[k] and cjk[k + 1]]  # Chinese bigrams
    bi = sorted(set(_pairs(q)[at].tolist())) if at else []
    lengths = np.array([d.length if isinstance(d, QueryCounts) else len(d)
                        if isinstance(d, np.ndarray) else d.total() for d in docs], np.float64)
    avgdl = float(lengths.mean()) or 1.0
    norm = K1 * (1 - B + B * lengths / avgdl)
    tf = np.zeros((len(uni) + len(bi), n))
    hashed: list[int] = []
    arrays: list[npt.NDArray[np.int64]] = []
    terms = [u for _, u in keyed]
    counted: list[int] = []
    rows: list[list[int]] = []
    zeros = [0] * len(terms)  # (the default of each look-up, for map)
    for j, d in enumerate(docs):
        if isinstance(d, np.ndarray):
            hashed.append(j)
            arrays.append(d)
        else:  # (a Counter's or QueryCounts' dictionary read directly)
            found = d.counts if isinstance(d, QueryCounts) else d
            counted.append(j)
            rows.append(list(map(found.get, terms, zeros)))
    if counted:
        tf[:len(uni), counted] = np.asarray(rows, np.float64).T
    if hashed:
        sub = lengths[hashed]
        flat: npt.NDArray[np.int64] = np.concatenate(arrays)
        starts = np.zeros(len(hashed), np.int64)
        np.cumsum(sub[:-1].astype(np.int64), out=starts[1:])
        tf[:len(uni), hashed] = _tf(flat, starts, sub, np.asarray(uni, np.int64))
        if bi and len(flat) > 1:
            same = np.ones(len(flat) - 1, bool)  # a pair within one document
            ends = (starts + sub.astype(np.int64))[:-1] - 1
            same[ends[(ends >= 0) & (ends < len(same))]] = False
            tf[len(uni):, hashed] = _tf(_pairs(flat), starts, sub,
                                        np.asarray(bi, np.int64), same)
    df = (tf > 0).sum(axis=1)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    scores = (idf[:, None] * tf * (K1 + 1) / (tf + norm[None, :])).sum(axis=0)
    return [float(s) for s in scores]
