"""Paged KV cache with a prefix cache over block hashes and LRU eviction.

Blocks are counted, not materialised: a block is either free, private to one
request (not shareable: partial blocks, output blocks, duplicates), or cached under
its hash with a reference count. Cached blocks whose count drops to zero stay in
the cache, in LRU order, until an allocation needs them back; referenced blocks
are never evicted. Every operation costs O(blocks touched), never O(tokens).

Optional second tier (``host_blocks`` > 0): host DRAM, as vLLM's CPU KV
offloading, LMCache's CPU backend and Mooncake's DRAM pool run it. A cached block
evicted from HBM is offloaded to the host tier (its own LRU) instead of being
dropped; the host tier drops its least recently used block when full. A prefix hit
on host blocks loads them back into HBM (the caller charges the transfer time) and
takes them out of the host tier, so a hash lives in at most one tier
(HBM -> host -> gone). With ``host_blocks`` = 0 nothing changes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class KVCache:
    """Block accounting for one engine: free, private, and hashed (cached) blocks."""

    __slots__ = (
        "_cache", "_host", "_lru", "block_size", "host_dropped", "host_loaded", "host_total",
        "num_private", "offloaded", "total",
    )

    def __init__(self, total_blocks: int, block_size: int, host_blocks: int = 0) -> None:
        if host_blocks < 0:
            raise ValueError("host_blocks must be >= 0")
        self.total = total_blocks
        self.block_size = block_size
        self.num_private = 0
        self._cache: dict[int, int] = {}  # block hash -> reference count
        self._lru: OrderedDict[int, None] = OrderedDict()  # hashes with count 0, oldest first
        self.host_total = host_blocks
        self._host: OrderedDict[int, None] = OrderedDict()  # host-tier hashes, oldest first
        self.offloaded = 0  # blocks moved HBM -> host
        self.host_loaded = 0  # blocks moved host -> HBM
        self.host_dropped = 0  # blocks dropped from the host tier

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
    def num_host(self) -> int:
        """Blocks held by the host tier."""
        return len(self._host)

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

    def match_tiers(self, block_hashes: Sequence[int], max_blocks: int) -> tuple[int, int, int]:
        """(leading blocks found in either tier, how many of them are idle in HBM, how
        many of them are in the host tier). Each block may sit in either tier."""
        cache = self._cache
        host = self._host
        n = 0
        idle = 0
        on_host = 0
        limit = min(max_blocks, len(block_hashes))
        while n < limit:
            h = block_hashes[n]
            count = cache.get(h)
            if count is None:
                if h not in host:
                    break
                on_host += 1
            elif count == 0:
                idle += 1
            n += 1
        return n, idle, on_host

    def tiered_prefix_blocks(self, block_hashes: Sequence[int]) -> int:
        """Leading blocks of this prefix present in either tier (no side effects)."""
        cache = self._cache
        host = self._host
        n = 0
        for h in block_hashes:
            if h not in cache and h not in host:
                break
            n += 1
        return n

    # --- mutations ---------------------------------------------------------------------
    def acquire_prefix(self, block_hashes: Sequence[int], n: int, extra: int) -> int:
        """Reference the first n blocks that match_tiers() found and take ``extra``
        private blocks after them. Host-tier blocks among the n are loaded into new
        HBM blocks (which become their cached copies). The caller has checked that
        ``available() - idle >= on_host + extra``. Returns the blocks loaded."""
        cache = self._cache
        lru = self._lru
        host = self._host
        loaded: list[int] = []
        for i in range(n):
            h = block_hashes[i]
            count = cache.get(h)
            if count is None:
                del host[h]  # out of the host tier before allocate() may spill into it
                loaded.append(h)
            else:
                if count == 0:
                    del lru[h]
                cache[h] = count + 1
        if not self.allocate(len(loaded) + extra):
            raise RuntimeError("acquire_prefix: not enough KV blocks (caller must check)")
        for h in loaded:
            cache[h] = 1
        self.num_private -= len(loaded)
        self.host_loaded += len(loaded)
        return len(loaded)

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
                if self.host_total:
                    self._offload(h)
        self.num_private += n
        return True

    def _offload(self, block_hash: int) -> None:
        host = self._host
        host[block_hash] = None
        self.offloaded += 1
        if len(host) > self.host_total:
            host.popitem(last=False)
            self.host_dropped += 1

    def promote(self, block_hash: int) -> bool:
        """Turn one private, now full block into the cached copy of block_hash.

        Returns False (the block stays private) when the hash is already cached, for
        instance because another request computed the same prefix at the same time.
        """
        if block_hash in self._cache:
            return False
        self._cache[block_hash] = 1
        self.num_private -= 1
        if self._host:
            self._host.pop(block_hash, None)  # the fresh HBM copy supersedes it
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
