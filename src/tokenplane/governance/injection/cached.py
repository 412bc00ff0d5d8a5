"""A detector that remembers the verdicts of texts it has already scored.

Retrieved chunks recur (the same passages answer many questions), and scoring one
costs about 0.3-0.6 ms per KB when it is not plain ASCII prose. Verdicts are keyed by
the source and a BLAKE2b digest of the text, so the cache holds no content. Bounded
LRU; thread-safe (documents are screened on the count offload's threads too).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from tokenplane.governance.injection.detector import InjectionDetector, Source, Verdict


class CachedDetector:
    """Wraps ``inner``; texts shorter than ``min_len`` are scored every time."""

    def __init__(self, inner: InjectionDetector, max_entries: int = 8192,
                 min_len: int = 64) -> None:
        self.inner = inner
        self.max_entries = max_entries
        self.min_len = min_len
        self._cache: OrderedDict[tuple[str, bytes], Verdict] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def score(self, text: str, source: Source = "user") -> Verdict:
        if len(text) < self.min_len:
            return self.inner.score(text, source)
        key = (source, hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                       digest_size=16).digest())
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return found
        verdict = self.inner.score(text, source)
        with self._lock:
            self.misses += 1
            self._cache[key] = verdict
            if len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return verdict
