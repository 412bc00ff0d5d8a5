"""An analyzer that remembers what it found in texts it has already scanned.

Chat requests resend the whole conversation every turn: the system prompt and the
history are the same texts again. Caching their spans (keyed by a BLAKE2b digest of
the text, so the cache holds no content) makes a turn cost about the scan of its new
message. Bounded LRU; thread-safe (the audit thread redacts with it too).

``nothing_in`` (no finding at all: most texts) takes the same short cuts: the cache for
a long text (a text the gates prove clean is remembered as such); for a short one a set
of short texts already found clean (a system prompt comes again with every request;
the set holds only texts with nothing to find, and is emptied when full), then the
inner analyzer's gates.
"""

from __future__ import annotations

import hashlib

from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.spans import Span
from tokenplane.lru import Lru


class CachedAnalyzer(Analyzer):
    """Wraps ``inner``; texts shorter than ``min_len`` are not cached."""

    def __init__(self, inner: Analyzer, max_entries: int = 4096, min_len: int = 64,
                 max_clean: int = 1024) -> None:
        super().__init__(inner.recognizers, min_score=inner.min_score)
        self.inner = inner
        self.max_entries = max_entries
        self.min_len = min_len
        self._cache: Lru[bytes, tuple[Span, ...]] = Lru(max_entries)
        self.max_clean = max_clean
        self._clean: set[str] = set()  # short texts in which nothing is found
        # the last text looked up, its key and what it holds (None: not known yet):
        # nothing_in then analyze of the same text object (a message with findings)
        # hash it and look it up once
        self._last: tuple[str | None, bytes, tuple[Span, ...] | None] = (None, b"", None)

    @property
    def hits(self) -> int:
        return self._cache.hits

    @property
    def misses(self) -> int:
        return self._cache.misses

    def nothing_in(self, text: str) -> bool:
        """True only when ``analyze(text)`` finds nothing: known from the cache, or
        proved by the gates (then remembered). False: look with ``analyze``."""
        if len(text) < self.min_len:
            clean = self._clean
            if text in clean:
                return True
            if not self.inner.nothing_in(text):
                return False
            if len(clean) >= self.max_clean:
                clean.clear()
            clean.add(text)
            return True
        key = self._key(text)
        found = self._get(key)
        if found is not None:
            self._last = (text, key, found)
            return not found
        if not self.inner.nothing_in(text):
            return False  # analyze() will scan it, and remember what it finds
        self._put(key, ())
        return True

    def analyze(self, text: str) -> list[Span]:
        if len(text) < self.min_len:
            return self.inner.analyze(text)
        last = self._last  # one read: the other thread may replace it meanwhile
        if last[0] is text and last[2] is not None:
            return list(last[2])
        key = self._key(text)
        found = self._get(key)
        if found is not None:
            return list(found)
        spans = self.inner.analyze(text)
        self._put(key, tuple(spans))
        return spans

    def _key(self, text: str) -> bytes:
        last = self._last
        if last[0] is text:
            return last[1]
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        self._last = (text, key, None)
        return key

    def _get(self, key: bytes) -> tuple[Span, ...] | None:
        return self._cache.get(key)

    def _put(self, key: bytes, spans: tuple[Span, ...]) -> None:
        self._cache.put(key, spans)
