"""Each document's text reduced once to what ranking and deduplication read, and a
bounded cache of it (retrieved chunks come back request after request).

A unit (``context/text.py``) is held as its string hash (or, where the compiled kernels
were built, ``context/unit_kernels.py``, a seeded hash of its bytes, made in C with the
shingles and the signature in one pass). Python salts string hashes per process (the
kernels' seed too), which is harmless here: a hash only has to be equal for equal units
within the process; every decision is made on exact sets and counts (near duplicates
are confirmed on the exact shingle sets, ``context/minhash.py``), so collisions aside
(64 bits) the results do not depend on the salt.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tokenplane.context import unit_kernels
from tokenplane.context.bm25 import Terms, ascii_terms
from tokenplane.context.minhash import U64Array, shingle_hashes, signature
from tokenplane.context.text import UNIT_RE, unit_bytes, units
from tokenplane.context.unit_kernels import analyse_data, hash_unit_data, unit_data

IntArray = npt.NDArray[np.int64]
DEFAULT_ENTRIES = 8192


@dataclass(frozen=True, slots=True)
class Analysis:
    units: IntArray  # the hash of each unit, in order
    shingles: U64Array  # the shingle hashes (distinct and sorted, unless compiled)
    signature: U64Array  # the MinHash signature (``minhash.BINS`` minima)
    key: int  # equal for texts with equal units (the exact-duplicate key)


def _data(text: str) -> bytes:
    """``text``'s units as the compiled kernels read them."""
    data = unit_bytes(text)
    return data if data is not None else unit_data(UNIT_RE.findall(text.lower()))


def unit_hashes(text: str) -> IntArray:
    """The hash of each unit of ``text``, in order (all BM25 reads)."""
    if unit_kernels.COMPILED:
        return hash_unit_data(_data(text))
    us = units(text)
    return np.fromiter(map(hash, us), np.int64, len(us))


def analyse(text: str) -> Analysis:
    if unit_kernels.COMPILED:  # the same, in one pass of C (context/unit_kernels.py)
        return Analysis(*analyse_data(_data(text)))
    us = units(text)
    hashes = np.fromiter(map(hash, us), np.int64, len(us))
    sh = shingle_hashes(hashes)
    return Analysis(hashes, sh, signature(sh), hash(tuple(us)))


class AnalysisCache:
    """The analyses of recent texts, least recently used out first; safe to share
    between threads (the table is touched under a lock, never while analysing)."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Analysis] = OrderedDict()
        self._terms: OrderedDict[str, Terms] = OrderedDict()  # texts only ranked
        self._ranked: OrderedDict[str, None] = OrderedDict()  # texts ranked once
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def terms(self, text: str) -> Terms:
        """What BM25 reads of ``text`` (``bm25.bm25_scores``): its cached analysis's unit
        hashes, else what was kept for a text only ranked before, else worked out (and
        kept: a text only ranked is not analysed), as :func:`bm25.ascii_terms` (its
        units counted) for ASCII text."""
        terms = self.known_terms(text)
        if terms is not None:
            return terms
        made = ascii_terms(text)
        terms = made if made is not None else unit_hashes(text)
        with self._lock:
            self._terms[text] = terms
            while len(self._terms) > self.max_entries:
                self._terms.popitem(last=False)
        return terms

    def known_terms(self, text: str) -> Terms | None:
        """What BM25 reads of ``text`` when this cache has it (its analysis's unit
        hashes, or the terms kept when it was ranked), else None (nothing is worked
        out: new texts are ranked all at once, ``context/query_counts.py``)."""
        with self._lock:
            found = self._entries.get(text)
            if found is not None:
                return found.units
            terms = self._terms.get(text)
            if terms is not None:
                self._terms.move_to_end(text)
            return terms

    def ranked_before(self, text: str) -> bool:
        """Whether ``text`` was ranked before (noted now): a text seen once is ranked
        for its query alone (``context/query_counts.py``); one that recurs gets its
        terms worked out and kept (:meth:`terms`)."""
        with self._lock:
            if text in self._ranked:
                return True
            self._ranked[text] = None
            while len(self._ranked) > self.max_entries:
                self._ranked.popitem(last=False)
            return False

    def get(self, text: str) -> Analysis:
        with self._lock:
            found = self._entries.get(text)
            if found is not None:
                self._entries.move_to_end(text)
                self.hits += 1
                return found
        found = analyse(text)
        with self._lock:
            self.misses += 1
            self._entries[text] = found
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return found
