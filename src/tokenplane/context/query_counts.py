"""What BM25 reads of new texts, for one query, all texts at once: each text's length
in units and how often each of the query's units occurs in it (``context/bm25.py``
needs nothing else of a text with no Chinese or Japanese character, which has no
character bigrams).

The texts' units (``text.unit_bytes``: UTF-8, separated by whitespace) are laid end to
end in one buffer and read with a few numpy operations over it, not word by word in
Python: where the words start and end, which text each is in, and each word's first 8
bytes as a number. A word of at most 7 bytes is equal to a query unit exactly when
their 8-byte numbers (zero-padded) and lengths are equal, so those are matched as one
sorted look-up; a longer query unit is matched on its first 8 bytes and its length,
and each such match is then compared whole. The counts are exact, equal to counting
the units (``tests/context/test_query_counts.py``), at about a fifth of the cost of a
``Counter`` per text. Where the compiled kernels were built (``context/unit_kernels.py``)
each text's units are read in one pass of C instead, with the same counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tokenplane.context import unit_kernels
from tokenplane.context.text import unit_bytes

_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], np.uint64)
_EIGHT = np.arange(8)
SHORT = 7  # words of at most this many bytes are matched on their 8-byte number alone


@dataclass(frozen=True, slots=True)
class QueryCounts:
    """A text's length in units and the occurrences of some units in it (only those
    of the query it was worked out for; any other unit reads 0)."""

    length: int
    counts: dict[str, int]

    def __getitem__(self, unit: str) -> int:
        return self.counts.get(unit, 0)

    def total(self) -> int:
        return self.length


def _numbers(a: npt.NDArray[np.uint8], starts: npt.NDArray[np.intp],
             sizes: npt.NDArray[np.intp]) -> npt.NDArray[np.uint64]:
    """Each word's first (up to) 8 bytes as a little-endian number."""
    at = np.minimum(starts[:, None] + _EIGHT, len(a) - 1)
    wide = np.ascontiguousarray(a[at]).view("<u8").ravel()
    out: npt.NDArray[np.uint64] = wide & _MASKS[np.minimum(sizes, 8)]
    return out


def _compiled(texts: Sequence[str], query_units: Sequence[str]) -> list[QueryCounts | None]:
    found = unit_kernels.query_counts(list(texts), tuple(sorted(set(query_units))))
    return [QueryCounts(*f) if f is not None else None for f in found]


def query_counts(texts: Sequence[str], query_units: Sequence[str]
                 ) -> list[QueryCounts | None]:
    """For each text, its :class:`QueryCounts` for ``query_units``; None for a text
    holding a Chinese or Japanese character (rank it by its unit hashes)."""
    if unit_kernels.COMPILED:  # text by text, one pass of C each (unit_kernels.py)
        return _compiled(texts, query_units)
    datas = [unit_bytes(t) for t in texts]
    out: list[QueryCounts | None] = [None] * len(texts)
    kept = [i for i, d in enumerate(datas) if d is not None]
    if not kept:
        return out
    parts = [datas[i] or b"" for i in kept]
    buf = b" " + b" ".join(parts) + b" "  # a space before and after every text
    a = np.frombuffer(buf, np.uint8)
    space = a == 32  # (unit_bytes leaves spaces only between units)
    edges = np.flatnonzero(space[1:] != space[:-1]) + 1  # (starts, ends) alternating
    starts, ends = edges[0::2], edges[1::2]
    offsets = np.cumsum([1] + [len(p) + 1 for p in parts[:-1]])
    first_word = np.searchsorted(starts, offsets)  # each text's first word
    lengths = np.diff(first_word, append=len(starts)).tolist()
    terms = sorted(set(query_units))
    encoded = [t.encode("utf-8", "surrogatepass") for t in terms]
    counts = np.zeros((len(terms), len(kept)), np.int64)
    if terms and len(starts):
        sizes = ends - starts
        # candidates: words whose first byte and length some query unit has
        table = np.zeros(256 * 256, bool)
        for e in encoded:
            table[e[0] * 256 + min(len(e), 255)] = True
        cand = np.flatnonzero(table[a[starts].astype(np.intp) * 256 + np.minimum(sizes, 255)])
        cs, csz = starts[cand], sizes[cand]
        numbers = _numbers(a, cs, csz)
        doc = np.searchsorted(offsets, cs, side="right") - 1
        short = [j for j, e in enumerate(encoded) if len(e) <= SHORT]
        if short:  # exact: the number and the length in one key, all at once
            keys = numbers | (np.minimum(csz, 8).astype(np.uint64) << np.uint64(56))
            want = np.array([int.from_bytes(encoded[j], "little") | (len(encoded[j]) << 56)
                             for j in short], np.uint64)
            hit = np.flatnonzero(np.isin(keys, want))
            if len(hit):
                order = np.argsort(want)
                rows = np.asarray(short, np.intp)[order][
                    np.searchsorted(want[order], keys[hit])]
                counts[:len(terms)] += np.bincount(
                    rows * len(kept) + doc[hit], minlength=counts.size).reshape(counts.shape)
        for j, e in enumerate(encoded):
            if len(e) <= SHORT:
                continue
            hit = np.flatnonzero((numbers == np.uint64(int.from_bytes(e[:8], "little")))
                                 & (csz == len(e)))
            hit = hit[[buf[s:s + len(e)] == e for s in cs[hit].tolist()]]  # the rest
            if len(hit):
                counts[j] += np.bincount(doc[hit], minlength=len(kept))
    table_out = counts.T.tolist()
    for k, i in enumerate(kept):
        out[i] = QueryCounts(lengths[k], {t: n for t, n in zip(terms, table_out[k],
                                                                strict=True) if n})
    return out
