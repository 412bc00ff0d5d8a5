"""Build the counter store that configuration asks for."""

from __future__ import annotations

import logging

from tokenplane.admission.stores.base import CounterStore
from tokenplane.admission.stores.local import LocalStore
from tokenplane.admission.stores.memory import MemoryStore
from tokenplane.admission.stores.redis import RedisStore
from tokenplane.admission.stores.resilient import FailureMode, ResilientStore


def make_store(redis_url: str | None, *, failure_mode: FailureMode = "fail_closed",
               replicas: int = 1, prefix: str = "tp:adm:", timeout_s: float = 0.5,
               probe_interval_s: float = 1.0, lease_s: float = 5.0,
               local_socket: str | None = None, workers: int = 1,
               logger: logging.Logger | None = None) -> CounterStore:
    """Redis shared by every replica when a URL is given; else, for the workers of one
    ``serve --workers N``, the serve parent's counter server at ``local_socket``;
    else in-process counters (one worker). Shared stores lease concurrency units
    (``lease_s``) and are wrapped in the configured failure policy. Connects lazily."""
    if redis_url:
        primary: RedisStore | LocalStore = RedisStore.from_url(
            redis_url, prefix=prefix, timeout_s=timeout_s, lease_s=lease_s)
    elif local_socket:
        primary = LocalStore(local_socket, timeout_s=timeout_s, lease_s=lease_s)
        replicas = max(replicas, workers)
    else:
        return MemoryStore()
    return ResilientStore(primary, mode=failure_mode, replicas=replicas,
                          probe_interval_s=probe_interval_s, logger=logger)
