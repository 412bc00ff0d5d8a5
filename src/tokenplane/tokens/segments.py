"""A bounded LRU of token counts for repeated prompt segments, keyed by content.

System prompts, tool schemas, few-shot blocks, RAG chunks and (in multi-turn chats) every
earlier message repeat across requests. The cache maps (tokenizer name, text parts) to the
per-part token counts of the parts tokenized *jointly* (the joint count is exact; each
part's share is its own count, with the boundary difference given to the largest part), so a
repeated segment costs one dict lookup instead of a tokenizer call. Bounded by entries and
by total characters held; hit / miss / eviction counters are public for metrics.
``lookup`` counts several one-part segments at once (the misses in one tokenizer call when
the tokenizer has ``count_many``).

The cache is shared by the event loop and the threads that count large prompts
(``pipeline/count_offload.py``): its tables are only touched under a lock, and never
while a tokenizer runs (a text being counted twice at once is stored once).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
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


class SegmentInfo(NamedTuple):
    """One tokenized run of the prompt: its (first part's) source, tokens, cache state."""

    source: str
    tokens: int
    chars: int
    cached: bool


Key = tuple[str, str | tuple[str, ...]]


class SegmentCache:
    def __init__(self, max_entries: int = 8192, max_chars: int = 16_000_000) -> None:
        if max_entries < 1 or max_chars < 1:
            raise ValueError("segment cache bounds must be positive")
        self.max_entries = max_entries
        self.max_chars = max_chars
        # (tokenizer name, text) -> its token count for one-part segments (nothing more to
        # allocate per entry); (name, parts) -> SegmentEntry for joint ones
        self._entries: OrderedDict[Key, int | SegmentEntry] = OrderedDict()
        self._fingerprints: OrderedDict[str, str] = OrderedDict()
        self.chars = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._lock = threading.Lock()  # the tables, never held while tokenizing

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
        one = len(parts) == 1
        key = (tokenizer.name, parts[0] if one else parts)
        entries = self._entries
        with self._lock:
            found = entries.get(key)
            if found is not None:
                entries.move_to_end(key)
                self.hits += 1
        if found is not None:
            if isinstance(found, int):
                return SegmentEntry((found,), found, len(parts[0])), True
            return found, True
        entry = self._compute(tokenizer, parts)
        with self._lock:
            self.misses += 1
            if key not in entries:
                entries[key] = entry.total if one else entry
                self.chars += entry.chars
                self._evict()
        return entry, False

    def lookup(self, tokenizer: Tokenizer, texts: Sequence[str]) -> tuple[list[int], list[bool]]:
        """Token counts of single-text segments and whether each was a hit.

        The same entries, counts and hit / miss statistics as ``measure(tokenizer, (text,))``
        for each text in turn (a text repeated in ``texts`` is a hit after its first
        occurrence), but the misses are tokenized together, with ``tokenizer.count_many``
        when it has one, and stored after the hits are refreshed.
        """
        name = tokenizer.name
        entries = self._entries
        counts: list[int] = []
        hit: list[bool] = []
        missing: list[int] = []
        with self._lock:
            for text in texts:
                key = (name, text)
                found = entries.get(key)
                if found is None:
                    missing.append(len(counts))
                    counts.append(0)
                    hit.append(False)
                else:
                    entries.move_to_end(key)
                    counts.append(found if isinstance(found, int) else found.total)
                    hit.append(True)
            self.hits += len(texts) - len(missing)
        if len(missing) == 1:  # the usual case: one new turn
            i = missing[0]
            text = texts[i]
            n = counts[i] = tokenizer.count(text)
            with self._lock:
                self.misses += 1
                if (name, text) not in entries:
                    entries[(name, text)] = n
                    self.chars += len(text)
                    if len(entries) > self.max_entries or self.chars > self.max_chars:
                        self._evict()
        elif missing:
            self._count_missing(tokenizer, texts, missing, counts, hit)
        return counts, hit

    def _count_missing(
        self, tokenizer: Tokenizer, texts: Sequence[str], missing: list[int],
        counts: list[int], hit: list[bool],
    ) -> None:
        """Fill ``counts`` at the ``missing`` positions; store each distinct text once (its
        later occurrences become hits, as they would be one after another)."""
        first: dict[str, int] = {}
        for i in missing:
            first.setdefault(texts[i], i)
        todo = list(first)
        many = getattr(tokenizer, "count_many", None)
        ns: list[int] = (
            many(todo) if many is not None and len(todo) > 1 else [tokenizer.count(t) for t in todo]
        )
        found = dict(zip(todo, ns, strict=True))
        for i in missing:
            text = texts[i]
            counts[i] = found[text]
            if first[text] != i:
                hit[i] = True
        name = tokenizer.name
        entries = self._entries
        with self._lock:
            self.misses += len(todo)
            self.hits += len(missing) - len(todo)
            for text, n in found.items():
                if (name, text) not in entries:
                    entries[(name, text)] = n
                    self.chars += len(text)
            self._evict()

    def _evict(self) -> None:
        """Drop least recently used entries until within both bounds (keeping one);
        under the lock."""
        entries = self._entries
        while len(entries) > self.max_entries or (self.chars > self.max_chars and len(entries) > 1):
            key, old = entries.popitem(last=False)
            self.chars -= old.chars if isinstance(old, SegmentEntry) else len(key[1])
            self.evictions += 1

    def peek(self, tokenizer: Tokenizer, text: str) -> int | None:
        """The cached count of one text segment, or None (never tokenizes; no hit or
        miss is recorded, the entry's place in the LRU is left as it is)."""
        with self._lock:
            found = self._entries.get((tokenizer.name, text))
        if found is None:
            return None
        return found if isinstance(found, int) else found.total

    def put(self, tokenizer: Tokenizer, text: str, count: int) -> None:
        """Keeps ``count`` as the count of the one-part segment ``text`` (worked out
        otherwise, exactly: a packed block's from its pieces, ``context/block_count.py``)."""
        with self._lock:
            if (tokenizer.name, text) not in self._entries:
                self._entries[(tokenizer.name, text)] = count
                self.chars += len(text)
                self._evict()

    def count(self, tokenizer: Tokenizer, text: str) -> int:
        """Token count of one text segment, through the cache."""
        return self.measure(tokenizer, (text,))[0].total

    def fingerprint(self, text: str) -> str:
        """:func:`fingerprint`, memoised for repeated texts (bounded like the entries)."""
        prints = self._fingerprints
        with self._lock:
            found = prints.get(text)
            if found is not None:
                prints.move_to_end(text)
                return found
        found = fingerprint(text)
        with self._lock:
            prints[text] = found
            if len(prints) > self.max_entries:
                prints.popitem(last=False)
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
