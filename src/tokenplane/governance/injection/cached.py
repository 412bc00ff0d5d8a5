"""A detector that remembers the verdicts of texts it has already scored.

Retrieved chunks recur (the same passages answer many questions), and scoring one
costs about 0.3-0.6 ms per KB when it is not plain ASCII prose. Verdicts are keyed by
the source and a BLAKE2b digest of the text, so the cache holds no content. Bounded
LRU; thread-safe (documents are screened on the count offload's threads too).
"""

from __future__ import annotations

import hashlib

from tokenplane.governance.injection.detector import InjectionDetector, Source, Verdict
from tokenplane.lru import Lru


class CachedDetector:
    """Wraps ``inner``; texts shorter than ``min_len`` are scored every time."""

    def __init__(self, inner: InjectionDetector, max_entries: int = 8192,
                 min_len: int = 64) -> None:
        self.inner = inner
        self.min_len = min_len
        self.cache: Lru[tuple[str, bytes], Verdict] = Lru(max_entries)

    def score(self, text: str, source: Source = "user") -> Verdict:
        if len(text) < self.min_len:
            return self.inner.score(text, source)
        key = (source, hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                       digest_size=16).digest())
        found = self.cache.get(key)
        if found is None:
            found = self.inner.score(text, source)
            self.cache.put(key, found)
        return found
