"""Build the counter store that configuration asks for."""

from __future__ import annotations

import logging

from tokenplane.admission.stores.base import CounterStore
from tokenplane.admission.stores.memory import MemoryStore
from tokenplane.admission.stores.redis import RedisStore
from tokenplane.admission.stores.resilient import FailureMode, ResilientStore


def make_store(redis_url: str | None, *, failure_mode: FailureMode = "fail_closed",
               replicas: int = 1, prefix: str = "tp:adm:", timeout_s: float = 0.5,
               probe_interval_s: float = 1.0,
               logger: logging.Logger | None = None) -> CounterStore:
    """In-process counters without a Redis URL (one worker); otherwise Redis shared by
    every replica, wrapped in the configured failure policy. Connects lazily."""
    if not redis_url:
        return MemoryStore()
    primary = RedisStore.from_url(redis_url, prefix=prefix, timeout_s=timeout_s)
    return ResilientStore(primary, mode=failure_mode, replicas=replicas,
                          probe_interval_s=probe_interval_s, logger=logger)
