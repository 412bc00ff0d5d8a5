"""Packing retrieved documents into a token budget (docs/CONTEXT.md).

``ContextPacker().pack(query, documents, budget, count)`` with ``count`` the model's
exact token count of a text. Only what the decision needs is counted and analysed
(docs/CONTEXT.md, "Counting only what the decision needs"): a document is counted when
it could fit (a ``floor`` under its count, when given, can show it cannot) and analysed
for duplicates when it would be kept or cut; the rest of the accounting (the other
documents' counts, the passed-over ones' reasons) is done before returning, or with
``defer=True`` by ``Packed.settle()``, with the same result:

1. an empty document is dropped (``empty``);
2. rank: the given scores when every document has one (``rank: auto``), else the
   plugged-in :class:`Ranker` (an embedding model), else BM25 against ``query``
   (``context/bm25.py``); ties keep the given order;
3. in rank order, keep a document whole if it fits what is left of the budget,
   unless it repeats one already kept: ``duplicate`` (the same units: case, spacing
   and punctuation aside) or ``near_duplicate`` (Jaccard similarity of shingles at or
   above the threshold, ``context/minhash.py``); pass over one that does not fit
   (smaller, lower-ranked ones may still fit);
4. fill what is left with the best passed-over document that repeats none kept, cut
   after the last sentence that fits (``context/text.py``: Latin and CJK sentence
   ends); the other passed-over ones are dropped as duplicates of a kept document
   (looked for all at once) or for the ``budget``;
5. lay the kept documents out in rank or given order, numbered ``[1]``, ``[2]``... in
   the order they appear, and count the block exactly (with ``joins``, from the
   documents' counts and a few words at each join, ``context/block_count.py``; else by
   counting it): while it is over the budget (token merges across the pieces' joins
   can differ from the sum of their counts), the cut document, then the lowest-ranked
   kept one, is taken out again. The block is never over the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from tokenplane.context import unit_kernels
from tokenplane.context.analysis import Analysis, AnalysisCache
from tokenplane.context.block_count import SEPARATOR, block_tokens
from tokenplane.context.bm25 import Terms, bm25_scores
from tokenplane.context.documents import (
    Document,
    Dropped,
    Kept,
    Packed,
    PackOptions,
    Ranker,
)
from tokenplane.context.minhash import BINS, MARGIN, estimates, jaccard
from tokenplane.context.query_counts import query_counts
from tokenplane.context.text import first_sentence_end, sentence_ends, units
from tokenplane.context.unit_kernels import near_rows
from tokenplane.tokens.space_splits import KnownCounts, SplitCounting

Count = Callable[[str], int]
# a lower bound of ``count(text)``; ``above``: where only whether it is over ``above``
# matters (a cheaper floor may be given when that one already is)
Floor = Callable[[str, int], int]
DEFAULT_OPTIONS = PackOptions()


@dataclass(slots=True)
class _Chosen:
    index: int
    rank: int
    text: str
    tokens: int  # what the accounting says it kept (at most the document's count)
    exact: int  # the count of ``text``
    truncated: bool = False


def _prefix(doc: Document, marker: int) -> str:
    return f"[{marker}] ({doc.source}) " if doc.source else f"[{marker}] "


def has_all_scores(documents: Sequence[Document]) -> bool:
    return bool(documents) and all(d.score is not None for d in documents)


class _KeptSignatures:
    """The MinHash signatures of the documents kept so far, as one array."""

    __slots__ = ("index", "sigs")

    def __init__(self, n: int) -> None:
        self.sigs = np.empty((n, BINS), np.uint64)
        self.index: list[int] = []

    def add(self, i: int, an: Analysis) -> None:
        self.sigs[len(self.index)] = an.signature
        self.index.append(i)

    def near(self, ans: list[Analysis], floor: float) -> list[list[int]]:
        """For each of ``ans``, the kept documents whose estimated similarity to it is
        ``floor`` or more (one vectorised comparison for all of them)."""
        if not self.index or not ans:
            return [[] for _ in ans]
        if unit_kernels.COMPILED:  # the same, in C (context/unit_kernels.py)
            kept = self.sigs[:len(self.index)]
            index = self.index
            return [[index[r] for r in near_rows(a.signature, kept, floor)] for a in ans]
        sigs = ans[0].signature[None] if len(ans) == 1 else np.stack(
            [a.signature for a in ans])
        est = estimates(sigs[:, None, :], self.sigs[None, :len(self.index)])
        rows, cols = np.nonzero(est >= floor)
        out: list[list[int]] = [[] for _ in ans]
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            out[r].append(self.index[c])
        return out


class ContextPacker:
    """``ranker`` replaces BM25 when the documents carry no scores; ``cache`` keeps
    the analyses of texts seen recently (``context/analysis.py``)."""

    __slots__ = ("cache", "ranker")

    def __init__(self, ranker: Ranker | None = None, cache: AnalysisCache | None = None
                 ) -> None:
        self.ranker = ranker
        self.cache = cache if cache is not None else AnalysisCache()

    def rank(self, query: str, documents: Sequence[Document],
             analyses: list[Analysis] | None, options: PackOptions) -> list[int]:
        """Document indices, most relevant first (stable). BM25 reads only the unit
        statistics (``analyses``' unit hashes when given, else ``AnalysisCache.terms``)."""
        n = len(documents)
        if options.rank == "scores" or (options.rank == "auto" and has_all_scores(documents)):
            if not has_all_scores(documents):
                raise ValueError("ranking by scores needs a score on every document")
            scores = [float(d.score) for d in documents]  # type: ignore[arg-type]
        elif options.rank == "auto" and self.ranker is not None:
            scores = self.ranker.scores(query, [d.text for d in documents])
        else:
            scores = bm25_scores(self._terms(query, documents, analyses), query)
        return sorted(range(n), key=lambda i: (-scores[i], i))

    def _terms(self, query: str, documents: Sequence[Document],
               analyses: list[Analysis] | None) -> list[Terms]:
        """What BM25 reads of each document: the cache's; for a text ranked before,
        its terms (kept); else worked out for this query, all new texts at once
        (``context/query_counts.py``; a Chinese or Japanese text's unit hashes, kept)."""
        if analyses is not None:
            return [a.units for a in analyses]
        cache = self.cache
        found = [cache.known_terms(d.text) for d in documents]
        for i, t in enumerate(found):  # a text seen before: its terms, kept for next time
            if t is None and cache.ranked_before(documents[i].text):
                found[i] = cache.terms(documents[i].text)
        new = [i for i, t in enumerate(found) if t is None]
        if new:
            fresh = query_counts([documents[i].text for i in new], units(query))
            for i, terms in zip(new, fresh, strict=True):
                found[i] = terms if terms is not None else self.cache.terms(documents[i].text)
        return [t for t in found if t is not None]

    def pack(self, query: str, documents: Sequence[Document], budget: int, count: Count,
             options: PackOptions = DEFAULT_OPTIONS, floor: Floor | None = None,
             defer: bool = False, joins: SplitCounting | None = None) -> Packed:
        """Packs ``documents``; ``floor``: a lower bound of ``count`` that costs no
        tokenizing (``Floor``: a document whose floor cannot fit is passed over
        uncounted).
        ``defer``: the documents the decision did not need are counted (and the reason
        they were dropped, ``duplicate`` or ``budget``, worked out) only by
        ``Packed.settle()``; else before returning. ``joins``: the tokenizer ``count``
        counts with, where its pre-tokens break at the block's joins
        (``context/block_count.py``): the block is then counted from its pieces."""
        docs = list(documents)
        counts: list[int | None] = [None] * len(docs)
        analyses: list[Analysis | None] = [None] * len(docs)
        cache = self.cache

        def tokens(i: int) -> int:
            n = counts[i]
            if n is None:
                n = counts[i] = count(docs[i].text)
            return n

        def an(i: int) -> Analysis:
            a = analyses[i]
            if a is None:
                a = analyses[i] = cache.get(docs[i].text)
            return a

        order = self.rank(query, docs, None, options)
        rank_of = {i: r for r, i in enumerate(order)}
        threshold = options.near_duplicate_threshold
        kept_sigs = _KeptSignatures(len(docs))
        dropped: list[Dropped] = []
        chosen: list[_Chosen] = []
        by_key: dict[int, int] = {}  # exact-duplicate key -> kept index
        passed: list[int] = []  # did not fit whole, in rank order
        wide = str(max(len(docs), 1))
        sep_cost = count(SEPARATOR) if budget > 0 else 0
        header = options.header.strip()
        used = count(header) if header else 0
        overhead: dict[str | None, int] = {}

        def cost(i: int) -> int:
            src = docs[i].source
            found = overhead.get(src)
            if found is None:
                found = overhead[src] = sep_cost + count(_prefix(docs[i], int(wide)))
            return found

        def duplicates(ixs: list[int]) -> list[Dropped | None]:
            """Whether each of ``ixs`` repeats a kept document (and which)."""
            if not options.dedup or not by_key:
                return [None] * len(ixs)
            near = kept_sigs.near([an(i) for i in ixs], threshold - MARGIN)
            out: list[Dropped | None] = []
            for i, candidates in zip(ixs, near, strict=True):
                j = by_key.get(an(i).key)
                if j is not None:
                    out.append(Dropped(docs[i].id, i, "duplicate", tokens(i), docs[j].id))
                    continue
                out.append(next((Dropped(docs[i].id, i, "near_duplicate", tokens(i),
                                         docs[j].id) for j in candidates
                                 if jaccard(an(i).shingles, an(j).shingles) >= threshold),
                                None))
            return out

        def duplicate_of(i: int) -> Dropped | None:
            return duplicates([i])[0]

        for r, i in enumerate(order):
            text = docs[i].text
            if not text or text.isspace():  # (no units either; strip() without a copy)
                dropped.append(Dropped(docs[i].id, i, "empty", tokens(i)))
                continue
            extra = cost(i) + (0 if chosen or not header else sep_cost)
            room = budget - used - extra
            # (a floor is at most the text's length: no use calling it on a short one)
            if room < 0 or (floor is not None and len(text) > room
                            and floor(text, room) > room):
                passed.append(i)  # cannot fit: not counted (unless it is cut below)
                continue
            need = tokens(i) + extra
            if used + need > budget:
                passed.append(i)  # its duplicates are looked for below, all at once
                continue
            dup = duplicate_of(i)
            if dup is not None:
                dropped.append(dup)
                continue
            chosen.append(_Chosen(i, r, text, tokens(i), tokens(i)))
            by_key.setdefault(an(i).key, i)
            kept_sigs.add(i, an(i))
            used += need
        cut: int | None = None
        if options.truncate and passed:
            cut = self._cut(docs, tokens, passed, chosen, duplicate_of, budget - used,
                            cost, sep_cost if header and not chosen else 0, count, rank_of,
                            floor)
            if cut is not None:
                by_key.setdefault(an(cut).key, cut)
                kept_sigs.add(cut, an(cut))
        rest = [i for i in passed if i != cut]

        def settle() -> tuple[list[Dropped], int]:
            """The passed-over documents, dropped as duplicates of a kept document
            (looked for all at once) or for the budget, and the tokens of the documents
            not counted before."""
            fresh = sum(tokens(i) for i, n in enumerate(counts) if n is None)
            out = [dup if dup is not None else Dropped(docs[i].id, i, "budget", tokens(i))
                   for i, dup in zip(rest, duplicates(rest), strict=True)]
            return out, fresh

        offered = sum(n for n in counts if n is not None)
        packed = self._lay_out(docs, tokens, chosen, dropped, header, budget, count, options,
                               offered, joins)
        packed.deferred = settle
        if not defer:
            packed.settle()
        return packed

    def _cut(self, docs: list[Document], tokens: Callable[[int], int], passed: list[int],
             chosen: list[_Chosen], duplicate_of: Callable[[int], Dropped | None],
             room: int, cost: Callable[[int], int], lead: int, count: Count,
             rank_of: dict[int, int], floor: Floor | None) -> int | None:
        """Cuts the best passed-over document (not a duplicate of one kept) after its
        last sentence that fits ``room``; returns its index (None when none fits).
        A prefix whose ``floor`` is over what is left is not counted (nor is a document
        whose first sentence is, looked at for duplicates)."""
        for i in passed:
            left = room - cost(i) - lead
            if left <= 0:
                if duplicate_of(i) is not None:
                    continue
                return None
            text = docs[i].text
            end = len(text.rstrip())
            first = first_sentence_end(text)
            if first is None or first >= end or (
                    floor is not None and floor(text[:first].rstrip(), left) > left):
                continue  # no sentence, or not even its first one fits: the next one
            if duplicate_of(i) is not None:
                continue
            ends = [e for e in sentence_ends(text) if e < end]
            lo, hi, best = 0, len(ends) - 1, -1
            best_tokens = 0
            while lo <= hi:  # the longest prefix of whole sentences that fits
                mid = (lo + hi) // 2
                prefix = text[:ends[mid]].rstrip()
                n = left + 1 if floor is not None and floor(prefix, left) > left \
                    else count(prefix)
                if n <= left:
                    best, best_tokens, lo = mid, n, mid + 1
                else:
                    hi = mid - 1
            if best < 0:
                continue
            prefix = text[:ends[best]].rstrip()
            chosen.append(_Chosen(i, rank_of[i], prefix, min(best_tokens, tokens(i)),
                                  best_tokens, True))
            return i
        return None

    @staticmethod
    def _block(header: str, pieces: list[tuple[str, str, int]], joins: SplitCounting,
               count: Count, text: str) -> int:
        """The block's count from its pieces, or the one kept for it (``KnownCounts``:
        the same block again), kept when worked out."""
        # (what isinstance(joins, KnownCounts) checks, without typing's slow protocol check)
        cached = cast(KnownCounts, joins) if getattr(joins, "known", None) is not None \
            and getattr(joins, "remember", None) is not None else None
        found = cached.known(text) if cached is not None and text else None
        if found is not None:
            return found
        n = block_tokens(header, pieces, joins, count)
        if cached is not None and text:
            cached.remember(text, n)
        return n

    def _lay_out(self, docs: list[Document], tokens: Callable[[int], int], chosen: list[_Chosen],
                 dropped: list[Dropped], header: str, budget: int, count: Count,
                 options: PackOptions, offered: int, joins: SplitCounting | None) -> Packed:
        while True:
            if options.order == "original":
                placed = sorted(chosen, key=lambda c: c.index)
            else:
                placed = sorted(chosen, key=lambda c: c.rank)
            pieces = [(_prefix(docs[c.index], m), c.text, c.exact)
                      for m, c in enumerate(placed, 1)]
            lines = [p + t for p, t, _ in pieces]
            if lines and header:
                lines.insert(0, header)
            text = SEPARATOR.join(lines)
            if joins is not None:
                block = self._block(header, pieces, joins, count, text)
            else:
                block = count(text) if text else 0
            if block <= budget:
                break
            # over by the joins: take out the cut document, else the lowest-ranked one
            out = next((c for c in chosen if c.truncated), None) \
                or max(chosen, key=lambda c: c.rank)
            chosen.remove(out)
            dropped.append(Dropped(docs[out.index].id, out.index, "budget",
                                   tokens(out.index)))
        kept: list[Kept] = []
        citations: dict[str, str] = {}
        for m, c in enumerate(placed, 1):
            doc = docs[c.index]
            kept.append(Kept(doc.id, m, c.index, c.tokens, c.truncated))
            citations[str(m)] = doc.id
            if c.truncated:
                dropped.append(Dropped(doc.id, c.index, "truncated", tokens(c.index) - c.tokens))
        dropped.sort(key=lambda d: d.index)
        return Packed(text, block, citations, kept, dropped, offered)
