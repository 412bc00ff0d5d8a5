"""The embedded cache store: in-process, bounded, with TTLs.

Exact entries: an LRU dict of at most ``exact_max`` entries. Semantic entries: one
:class:`~tokenplane.cache.vector_index.VectorIndex` per partition (scope and
fingerprints), at most ``semantic_max`` entries over all partitions, the oldest evicted
first. Expired entries are never served and are dropped when met or compacted.
Invalidation drops a tenant's (or a tenant's app's) entries of both kinds.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from tokenplane.cache.entry import Entry
from tokenplane.cache.vector_index import VectorIndex, rotation


@dataclass
class _Partition:
    tenant: str
    app: str
    index: VectorIndex[Entry]
    rows: dict[int, int] = field(default_factory=dict)  # entry seq -> row


class MemoryStore:
    def __init__(self, exact_max: int, semantic_max: int, dim: int = 512,
                 max_bytes: int = 256 << 20) -> None:
        self.exact_max = exact_max
        self.semantic_max = semantic_max
        self.max_bytes = max_bytes
        self.bytes = 0  # the answers held (an answer in both caches counts twice)
        self.dim = dim
        self._exact: OrderedDict[str, Entry] = OrderedDict()
        self._parts: dict[str, _Partition] = {}
        self._order: deque[tuple[str, int]] = deque()  # (partition, seq), oldest first
        self._semantic = 0
        self._seq = 0
        self._rotate = rotation(dim)

    # -- exact --------------------------------------------------------------------------

    def get_exact(self, key: str, now: float) -> Entry | None:
        entry = self._exact.get(key)
        if entry is None:
            return None
        if entry.expires <= now:
            del self._exact[key]
            self.bytes -= entry.size()
            return None
        self._exact.move_to_end(key)
        return entry

    def put_exact(self, key: str, entry: Entry) -> None:
        old = self._exact.pop(key, None)
        if old is not None:
            self.bytes -= old.size()
        self._exact[key] = entry
        self.bytes += entry.size()
        while len(self._exact) > self.exact_max:
            self.bytes -= self._exact.popitem(last=False)[1].size()
        self._shed()

    def _shed(self) -> None:
        """Evicts until the answers held fit ``max_bytes``: exact entries least recently
        used first, then semantic ones oldest first."""
        while self.bytes > self.max_bytes and self._exact:
            self.bytes -= self._exact.popitem(last=False)[1].size()
        while self.bytes > self.max_bytes and self._order:
            self._evict(*self._order.popleft())

    # -- semantic -----------------------------------------------------------------------

    def nearest(self, partition: str, vec: npt.NDArray[np.float32], threshold: float,
                now: float) -> tuple[float, Entry] | None:
        part = self._parts.get(partition)
        if part is None:
            return None
        return part.index.nearest(vec, threshold, now)

    def put_semantic(self, partition: str, vecs: npt.NDArray[np.float32],
                     entries: list[Entry]) -> None:
        """Adds entries (one vector row each) to a partition, evicting the oldest
        entries of the store beyond its bound."""
        if not entries:
            return
        first = entries[0]
        part = self._parts.get(partition)
        if part is None:
            part = self._parts[partition] = _Partition(
                first.tenant, first.app, VectorIndex(self.dim, self._rotate))
        for e in entries:
            self._seq += 1
            e.seq = self._seq
        rows = part.index.add_many(vecs.reshape(len(entries), -1), entries,
                                   max(e.expires for e in entries))
        for e, row in zip(entries, rows, strict=True):
            part.index.expires[row] = e.expires
            part.rows[e.seq] = row
            self._order.append((partition, e.seq))
        self._semantic += len(entries)
        self.bytes += sum(e.size() for e in entries)
        while self._semantic > self.semantic_max and self._order:
            self._evict(*self._order.popleft())
        self._shed()
        if len(self._order) > 2 * max(self.semantic_max, self._semantic):
            self._order = deque(o for o in self._order if o[0] in self._parts
                                and o[1] in self._parts[o[0]].rows)
        if part.index.dead * 2 >= part.index.rows:
            self._compact(partition, part, first.created)

    def _evict(self, partition: str, seq: int) -> None:
        part = self._parts.get(partition)
        if part is None:
            return
        row = part.rows.pop(seq, None)
        gone = part.index.remove(row) if row is not None else None
        if gone is not None:
            self._semantic -= 1
            self.bytes -= gone.size()

    def _compact(self, name: str, part: _Partition, now: float) -> None:
        before = len(part.index)
        held = sum(e.size() for e in part.index.items if e is not None)
        moves = part.index.compact(now)
        self._semantic -= before - len(part.index)
        self.bytes -= held - sum(e.size() for e in part.index.items if e is not None)
        if moves:
            part.rows = {seq: moves[row] for seq, row in part.rows.items() if row in moves}
        if len(part.index) == 0:
            del self._parts[name]

    # -- housekeeping -------------------------------------------------------------------

    def invalidate(self, tenant: str, app: str | None = None) -> int:
        """Drops the tenant's entries (only its app's when ``app`` is given)."""
        def matches(t: str, a: str) -> bool:
            return t == tenant and (app is None or a == app)

        gone = [k for k, e in self._exact.items() if matches(e.tenant, e.app)]
        for k in gone:
            self.bytes -= self._exact.pop(k).size()
        removed = len(gone)
        for name in [n for n, p in self._parts.items() if matches(p.tenant, p.app)]:
            part = self._parts.pop(name)
            removed += len(part.index)
            self._semantic -= len(part.index)
            self.bytes -= sum(e.size() for e in part.index.items if e is not None)
        return removed

    def sizes(self) -> tuple[int, int]:
        """(exact entries, semantic entries)."""
        return len(self._exact), self._semantic
