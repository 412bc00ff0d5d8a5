"""Which prompt prefixes the gateway has sent to which replica.

Learned only from the gateway's own routing decisions: every routed request's
block hashes are recorded against the replica that got it. Each replica keeps a
bounded LRU of block hashes (an approximation of its prefix cache).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence


class PrefixIndex:
    """Bounded per-replica LRU of block hashes with longest-prefix match."""

    def __init__(self, capacity_blocks: int = 100_000) -> None:
        if capacity_blocks <= 0:
            raise ValueError("capacity_blocks must be positive")
        self.capacity_blocks = capacity_blocks
        self._blocks: dict[str, OrderedDict[int, None]] = {}

    def record(self, endpoint_id: str, block_hashes: Sequence[int]) -> None:
        """Remember that ``endpoint_id`` now holds these blocks (most recent use)."""
        lru = self._blocks.setdefault(endpoint_id, OrderedDict())
        for h in block_hashes:
            if h in lru:
                lru.move_to_end(h)
            else:
                lru[h] = None
        while len(lru) > self.capacity_blocks:
            lru.popitem(last=False)

    def match(self, endpoint_id: str, block_hashes: Sequence[int]) -> int:
        """Number of leading blocks of ``block_hashes`` this replica is believed to hold."""
        lru = self._blocks.get(endpoint_id)
        if not lru:
            return 0
        n = 0
        for h in block_hashes:
            if h not in lru:
                break
            n += 1
        return n

    def match_all(
        self, endpoint_ids: Iterable[str], block_hashes: Sequence[int]
    ) -> dict[str, int]:
        """Longest-prefix match length (in blocks) for each replica."""
        return {eid: self.match(eid, block_hashes) for eid in endpoint_ids}

    def size(self, endpoint_id: str) -> int:
        """Blocks currently remembered for a replica."""
        lru = self._blocks.get(endpoint_id)
        return len(lru) if lru else 0

    def forget(self, endpoint_id: str) -> None:
        """Drop everything known about a replica (it restarted or left)."""
        self._blocks.pop(endpoint_id, None)
