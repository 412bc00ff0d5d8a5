"""A bounded LRU of token counts for repeated prompt segments, keyed by content.

System prompts, tool schemas, few-shot blocks, RAG chunks and (in multi-turn chats) every
earlier message repeat across requests. The cache maps (tokenizer name, text parts) to the
per-part token counts of the parts tokenized *jointly* (the joint count is exact; each
part's share is its own count, with the boundary difference given to the largest part), so a
repeated segment costs one dict lookup instead of a tokenizer call. Bounded by entries and
by total characters held; hit / miss / eviction counters are public for metrics.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import NamedTuple

from tokenplane.tokens.base import Tokenizer


def fingerprint(text: str) -> str:
    """A stable short content id: the first 16 hex digits of sha256(text)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class SegmentEntry(NamedTuple):
    """Per-part token counts of a segment, their sum, and its length in characters."""

    counts: tuple[int, ...]
    total: int
    chars: int


class SegmentCache:
    def __init__(self, max_entries: int = 8192, max_chars: int = 16_000_000) -> None:
        if max_entries < 1 or max_chars < 1:
            raise ValueError("segment cache bounds must be positive")
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._entries: OrderedDict[tuple[str, tuple[str, ...]], SegmentEntry] = OrderedDict()
        self._fingerprints: OrderedDict[str, str] = OrderedDict()
        self.chars = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        """Always true: an empty cache is still a cache (``cache or SegmentCache()`` is safe)."""
        return True

    @property
    def hit_ratio(self) -> float:
        seen = self.hits + self.misses
        return self.hits / seen if seen else 0.0

    def measure(self, tokenizer: Tokenizer, parts: tuple[str, ...]) -> tuple[SegmentEntry, bool]:
        """Per-part counts of ``parts`` tokenized as one string, and whether it was a hit."""
        key = (tokenizer.name, parts)
        entries = self._entries
        found = entries.get(key)
        if found is not None:
            entries.move_to_end(key)
            self.hits += 1
            return found, True
        self.misses += 1
        entry = self._compute(tokenizer, parts)
        entries[key] = entry
        self.chars += entry.chars
        while len(entries) > self.max_entries or (self.chars > self.max_chars and len(entries) > 1):
            _, old = entries.popitem(last=False)
            self.chars -= old.chars
            self.evictions += 1
        return entry, False

    def count(self, tokenizer: Tokenizer, text: str) -> int:
        """Token count of one text segment, through the cache."""
        return self.measure(tokenizer, (text,))[0].total

    def fingerprint(self, text: str) -> str:
        """:func:`fingerprint`, memoised for repeated texts (bounded like the entries)."""
        found = self._fingerprints.get(text)
        if found is None:
            found = fingerprint(text)
            self._fingerprints[text] = found
            if len(self._fingerprints) > self.max_entries:
                self._fingerprints.popitem(last=False)
        else:
            self._fingerprints.move_to_end(text)
        return found

    @staticmethod
    def _compute(tokenizer: Tokenizer, parts: tuple[str, ...]) -> SegmentEntry:
        chars = sum(len(p) for p in parts)
        if len(parts) == 1:
            n = tokenizer.count(parts[0])
            return SegmentEntry((n,), n, chars)
        joint = tokenizer.count("".join(parts))
        shares = [tokenizer.count(p) for p in parts]
        residual = joint - sum(shares)
        while residual:
            i = max(range(len(shares)), key=shares.__getitem__)
            step = residual if residual > 0 else -min(shares[i], -residual)
            shares[i] += step
            residual -= step
        return SegmentEntry(tuple(shares), joint, chars)
