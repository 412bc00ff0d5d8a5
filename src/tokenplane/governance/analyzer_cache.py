"""An analyzer that remembers what it found in texts it has already scanned.

Chat requests resend the whole conversation every turn: the system prompt and the
history are the same texts again. Caching their spans (keyed by a BLAKE2b digest of
the text, so the cache holds no content) makes a turn cost about the scan of its new
message. Bounded LRU; thread-safe (the audit thread redacts with it too).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.spans import Span


class CachedAnalyzer(Analyzer):
    """Wraps ``inner``; texts shorter than ``min_len`` are scanned every time."""

    def __init__(self, inner: Analyzer, max_entries: int = 4096, min_len: int = 64) -> None:
        super().__init__(inner.recognizers, min_score=inner.min_score)
        self.inner = inner
        self.max_entries = max_entries
        self.min_len = min_len
        self._cache: OrderedDict[bytes, tuple[Span, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def analyze(self, text: str) -> list[Span]:
        if len(text) < self.min_len:
            return self.inner.analyze(text)
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return list(found)
        spans = self.inner.analyze(text)
        with self._lock:
            self.misses += 1
            self._cache[key] = tuple(spans)
            if len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return spans
