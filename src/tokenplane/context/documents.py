"""What the packer takes and gives: documents, options, the packed result."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Order = Literal["relevance", "original"]
RankBy = Literal["auto", "scores", "bm25"]
# ``injection``: left out before packing by the governance screen (context/screened.py)
DropReason = Literal["duplicate", "near_duplicate", "budget", "truncated", "empty",
                     "injection"]
DROP_REASONS: tuple[DropReason, ...] = ("duplicate", "near_duplicate", "budget", "truncated",
                                        "empty", "injection")


@dataclass(frozen=True, slots=True)
class Document:
    """One retrieved chunk. ``score``: the retriever's relevance (higher is better)."""

    id: str
    text: str
    score: float | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class PackOptions:
    """``dedup``: drop exact duplicates (same units, whatever the case, spacing or
    punctuation) and near duplicates (estimated Jaccard similarity of their 3-unit
    shingles at least ``near_duplicate_threshold``) of a document already kept.
    ``rank``: ``auto`` uses the scores when every document has one, else BM25 against
    the query (or a ranker the caller plugs in). ``order``: the kept documents in rank
    order or in the order given. ``truncate``: the best document that does not fit
    whole is cut at a sentence boundary to fill what is left. ``header``: a line
    before the documents (empty: none)."""

    dedup: bool = True
    near_duplicate_threshold: float = 0.8
    rank: RankBy = "auto"
    order: Order = "relevance"
    truncate: bool = True
    header: str = ("Use the numbered context documents below; cite them by their "
                   "markers, e.g. [1].")


class Ranker(Protocol):
    """Scores documents against a query (higher: more relevant). BM25 is built in; an
    embedding model (``tokenplane.embeddings``) plugs in here."""

    def scores(self, query: str, texts: list[str]) -> list[float]: ...


@dataclass(frozen=True, slots=True)
class Kept:
    id: str
    marker: int  # the document is cited as [marker]
    index: int  # its position in the request
    tokens: int  # tokens of the text kept (the whole text unless truncated)
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class Dropped:
    """A document (or, ``truncated``, the cut-off end of one) left out. ``of``: the
    kept document it duplicates."""

    id: str
    index: int
    reason: DropReason
    tokens: int
    of: str | None = None


@dataclass(slots=True)
class Packed:
    """``text``: the block to put in the prompt, ``tokens`` its exact count (never over
    the budget); ``citations``: marker ("1") -> document id. Token accounting is over
    the documents' own texts: ``offered == kept + dropped`` exactly, where a truncated
    document's kept part is in ``kept`` and the rest of it in ``dropped``."""

    text: str
    tokens: int
    citations: dict[str, str]
    kept: list[Kept] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)
    offered_tokens: int = 0
    # the accounting the packing decision did not need (``ContextPacker.pack(defer=
    # True)``): the passed-over documents' drops and the tokens of those not counted
    deferred: Callable[[], tuple[list[Dropped], int]] | None = field(
        default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False,
                                  compare=False)

    @property
    def settled(self) -> bool:
        """Whether ``dropped`` and ``offered_tokens`` are complete (``kept``, ``text``,
        ``tokens`` and ``citations`` always are)."""
        return self.deferred is None

    def settle(self) -> Packed:
        """Completes the accounting: counts the documents the decision never needed
        and adds their drops (once; safe to call from several threads)."""
        with self._lock:
            work = self.deferred
            if work is not None:
                more, tokens = work()
                self.dropped = sorted(self.dropped + more, key=lambda d: d.index)
                self.offered_tokens += tokens
                self.deferred = None
        return self

    @property
    def kept_tokens(self) -> int:
        return sum(k.tokens for k in self.kept)

    @property
    def dropped_tokens(self) -> int:
        return sum(d.tokens for d in self.dropped)

    def dropped_by_reason(self) -> dict[str, dict[str, int]]:
        """``{reason: {"documents": n, "tokens": t}}`` for the reasons that occurred."""
        out: dict[str, dict[str, int]] = {}
        for d in self.dropped:
            entry = out.setdefault(d.reason, {"documents": 0, "tokens": 0})
            entry["documents"] += 1
            entry["tokens"] += d.tokens
        return out
