"""Near-duplicate detection: MinHash over 3-unit shingles (one-permutation variant),
confirmed on the exact shingle sets.

A shingle is 3 consecutive units (``context/text.py``: words, or single characters in
Chinese and Japanese, whose words are not space-separated; 3 characters are about one
or two Chinese words, about as selective as 3 English words are in English). A text of
fewer than 3 units is one shingle of all of them. Each shingle is hashed once (the
splitmix64 finalizer over a polynomial of its unit hashes); the 64-bit space is cut
into ``BINS`` bins by the top bits, and a document's signature keeps the smallest hash
in each bin (one-permutation hashing, Li, Owen and Zhang 2012: one hash per shingle
instead of one per shingle and permutation). The Jaccard similarity of two documents is
estimated as the share of bins, among those not empty in both, whose minima are equal
(standard error about sqrt(J(1-J)/BINS): 0.035 at J = 0.8). The packer compares a
document's signature with those already kept (cheap, vectorised) and confirms a
candidate within ``MARGIN`` of the threshold on the exact sets of shingle hashes,
so the decision is the exact Jaccard similarity's, not the estimate's.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

BINS = 128
MARGIN = 0.15
_BIN_SHIFT = np.uint64(64 - 7)  # log2(BINS)
_VALUE_MASK = np.uint64((1 << 57) - 1)
_EMPTY = np.uint64((1 << 64) - 1)
_P1 = np.uint64(0x9E3779B97F4A7C15)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

U64Array = npt.NDArray[np.uint64]


def mix(h: U64Array) -> U64Array:
    """The splitmix64 finalizer, in place (array arithmetic wraps silently)."""
    h ^= h >> np.uint64(30)
    h *= _M1
    h ^= h >> np.uint64(27)
    h *= _M2
    h ^= h >> np.uint64(31)
    return h


def shingle_hashes(units: npt.NDArray[np.int64]) -> U64Array:
    """The distinct hashes of the 3-unit shingles of one text, sorted."""
    u = units.view(np.uint64)
    n = len(u)
    if n >= 3:
        h = u[:-2] * _P1
        h += u[1:-1] * _P2
        h += u[2:]
    elif n:
        h = np.zeros(1, np.uint64)
        for x in u:
            h = h * _P1 + x
    else:
        return np.zeros(0, np.uint64)
    mix(h)
    h.sort()
    if len(h) < 2:
        return h
    keep = np.empty(len(h), bool)
    keep[0] = True
    np.not_equal(h[1:], h[:-1], out=keep[1:])
    out: U64Array = h[keep]
    return out


def signature(shingles: U64Array) -> U64Array:
    """The smallest hash in each bin: ``shingles`` are sorted, so a bin's first one."""
    sig = np.full(BINS, _EMPTY, dtype=np.uint64)
    if len(shingles):
        bins = (shingles >> _BIN_SHIFT).astype(np.intp)
        first = np.empty(len(bins), bool)
        first[0] = True
        np.not_equal(bins[1:], bins[:-1], out=first[1:])
        sig[bins[first]] = shingles[first] & _VALUE_MASK
    return sig


def estimates(sig: U64Array, others: U64Array) -> npt.NDArray[np.float64]:
    """Estimated Jaccard similarity of signatures (along the last axis; broadcast): the
    share of equal minima among the bins not empty in both."""
    eq = sig == others
    both_empty = (eq & (sig == _EMPTY)).sum(axis=-1)
    out: npt.NDArray[np.float64] = (eq.sum(axis=-1) - both_empty) / np.maximum(
        BINS - both_empty, 1)
    return out


def jaccard(a: U64Array, b: U64Array) -> float:
    """Exact Jaccard similarity of two sets of shingle hashes (given as arrays, repeats
    allowed: the compiled analyses', ``context/unit_kernels.py``, are not deduplicated)."""
    a, b = np.unique(a), np.unique(b)
    if not len(a) and not len(b):
        return 1.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)
