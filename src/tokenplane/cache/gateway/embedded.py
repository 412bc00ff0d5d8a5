"""The embedded store: :class:`~tokenplane.cache.memory_store.MemoryStore` behind the
async ``CacheStore`` interface (each gateway process its own)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tokenplane.cache.entry import Entry
from tokenplane.cache.memory_store import MemoryStore


class EmbeddedStore:
    def __init__(self, exact_max: int, semantic_max: int, dim: int,
                 max_bytes: int = 256 << 20) -> None:
        self.memory = MemoryStore(exact_max, semantic_max, dim, max_bytes)

    async def get_exact(self, tenant: str, app: str, key: str, now: float) -> Entry | None:
        return self.memory.get_exact(key, now)

    async def put_exact(self, key: str, entry: Entry) -> None:
        self.memory.put_exact(key, entry)

    async def nearest(self, tenant: str, app: str, partition: str,
                      vec: npt.NDArray[np.float32], threshold: float, now: float
                      ) -> tuple[float, Entry] | None:
        return self.memory.nearest(partition, vec, threshold, now)

    async def put_semantic(self, partition: str, vec: npt.NDArray[np.float32],
                           entry: Entry) -> None:
        self.memory.put_semantic(partition, vec, [entry])

    async def invalidate(self, tenant: str, app: str | None) -> int:
        return self.memory.invalidate(tenant, app)

    async def close(self) -> None:
        return None
