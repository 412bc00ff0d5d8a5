"""Paged KV cache with a prefix cache over block hashes and LRU eviction.

Blocks are counted, not materialised: a block is either free, private to one
request (not shareable: partial blocks, output blocks, duplicates), or cached under
its hash with a reference count. Cached blocks whose count drops to zero stay in
the cache, in LRU order, until an allocation needs them back; referenced blocks
are never evicted. Every operation costs O(blocks touched), never O(tokens).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class KVCache:
    """Block accounting for one engine: free, private, and hashed (cached) blocks."""

    __slots__ = ("_cache", "_lru", "block_size", "num_private", "total")

    def __init__(self, total_blocks: int, block_size: int) -> None:
        self.total = total_blocks
        self.block_size = block_size
        self.num_private = 0
        self._cache: dict[int, int] = {}  # block hash -> reference count
        self._lru: OrderedDict[int, None] = OrderedDict()  # hashes with count 0, oldest first

    # --- views -------------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """Blocks holding nothing at all."""
        return self.total - self.num_private - len(self._cache)

    @property
    def num_evictable(self) -> int:
        """Cached blocks no running request references."""
        return len(self._lru)

    @property
    def num_cached(self) -> int:
        return len(self._cache)

    @property
    def num_used(self) -> int:
        """Blocks referenced by requests (what vLLM reports as KV usage)."""
        return self.num_private + len(self._cache) - len(self._lru)

    def available(self) -> int:
        """Blocks an allocation may take (free plus evictable)."""
        return self.total - self.num_private - len(self._cache) + len(self._lru)

    def match(self, block_hashes: Sequence[int], max_blocks: int) -> tuple[int, int]:
        """(leading blocks found in cache, how many of those are evictable now)."""
        cache = self._cache
        n = 0
        idle = 0
        limit = min(max_blocks, len(block_hashes))
        while n < limit:
            count = cache.get(block_hashes[n])
            if count is None:
                break
            if count == 0:
                idle += 1
            n += 1
        return n, idle

    # --- mutations ---------------------------------------------------------------------
    def acquire(self, block_hashes: Sequence[int], n: int) -> None:
        """Reference the first n blocks of a prefix that match() found."""
        cache = self._cache
        lru = self._lru
        for i in range(n):
            h = block_hashes[i]
            count = cache[h]
            if count == 0:
                del lru[h]
            cache[h] = count + 1

    def allocate(self, n: int) -> bool:
        """Take n private blocks, evicting idle cached blocks as needed."""
        if n <= 0:
            return True
        free = self.total - self.num_private - len(self._cache)
        if free < n:
            need = n - free
            if need > len(self._lru):
                return False
            lru = self._lru
            cache = self._cache
            for _ in range(need):
                h, _none = lru.popitem(last=False)
                del cache[h]
        self.num_private += n
        return True

    def promote(self, block_hash: int) -> bool:
        """Turn one private, now full block into the cached copy of block_hash.

        Returns False (the block stays private) when the hash is already cached, for
        instance because another request computed the same prefix at the same time.
        """
        if block_hash in self._cache:
            return False
        self._cache[block_hash] = 1
        self.num_private -= 1
        return True

    def release(self, cached: Sequence[int], num_private: int) -> None:
        """Drop a request's references; cached blocks go to the LRU tail-first."""
        self.num_private -= num_private
        cache = self._cache
        lru = self._lru
        for h in reversed(cached):
            count = cache[h] - 1
            cache[h] = count
            if count == 0:
                lru[h] = None

    def cached_prefix_blocks(self, block_hashes: Sequence[int]) -> int:
        """Leading blocks of this prefix present in the cache (no side effects)."""
        cache = self._cache
        n = 0
        for h in block_hashes:
            if h not in cache:
                break
            n += 1
        return n
