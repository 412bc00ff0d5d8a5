"""The interface both stores implement (embedded: ``cache/gateway/embedded.py``,
Redis: ``cache/gateway/redis_store.py``). Every call names the tenant and app: a
store keeps each (tenant, app) apart and invalidates by them."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from tokenplane.cache.entry import Entry


class CacheStore(Protocol):
    async def get_exact(self, tenant: str, app: str, key: str, now: float) -> Entry | None: ...

    async def put_exact(self, key: str, entry: Entry) -> None: ...

    async def nearest(self, tenant: str, app: str, partition: str,
                      vec: npt.NDArray[np.float32], threshold: float, now: float
                      ) -> tuple[float, Entry] | None: ...

    async def put_semantic(self, partition: str, vec: npt.NDArray[np.float32],
                           entry: Entry) -> None: ...

    async def invalidate(self, tenant: str, app: str | None) -> int:
        """Drops the tenant's entries (its app's only, given one); how many (the Redis
        store counts the keys it deleted)."""
        ...

    async def close(self) -> None: ...
