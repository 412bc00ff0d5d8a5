"""An alias's tokenizer with the breaks of ``tokens/space_splits.py``, with its segment
cache: what ``ModelCounters.joins`` hands the context packer. The packer counts a block
from its pieces (``context/block_count.py``) and keeps the count here, so the same block
(retrieved chunks recur) is a look-up the next time, as counting it whole was."""

from __future__ import annotations

from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.segments import SegmentCache
from tokenplane.tokens.space_splits import SplitCounting


class CachedSplits:
    __slots__ = ("cache", "splits", "tokenizer")

    def __init__(self, tokenizer: Tokenizer, splits: SplitCounting, cache: SegmentCache
                 ) -> None:
        self.tokenizer = tokenizer  # (the segment cache's key)
        self.splits = splits
        self.cache = cache

    def count(self, text: str) -> int:
        return self.splits.count(text)

    def ordinary(self, text: str) -> bool:
        return self.splits.ordinary(text)

    def known(self, text: str) -> int | None:
        return self.cache.peek(self.tokenizer, text)

    def remember(self, text: str, count: int) -> None:
        self.cache.put(self.tokenizer, text, count)
