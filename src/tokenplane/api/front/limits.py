"""How long the front waits for a request and how many connections it holds.

``server:`` in the config (``config/schema.ServerConfig``) sets them; ``build_app``
puts them on the application (``FRONT_LIMITS``) so that ``tokenplane serve`` and the
test harness run the same front. ``max_connections`` left unset is derived from the
open-file limit, which ``serve`` first raises to its hard limit (:func:`raise_nofile`),
as nginx and uvicorn users expect.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass

from aiohttp import web

from tokenplane.config.schema import ServerConfig

log = logging.getLogger("tokenplane.api")

_NOFILE_CAP = 1 << 20  # what "unlimited" is raised to (Linux's default fs.nr_open)
_FD_RESERVE = 256  # files, journals, databases, Redis, metrics, idle upstream connections
_AUTO_MAX = 16_384  # the derived cap never exceeds this (per worker)


@dataclass(frozen=True, slots=True)
class FrontLimits:
    header_timeout_s: float = 20.0
    body_timeout_s: float = 20.0
    body_min_rate: int = 500  # bytes/s; each such amount received adds a second
    keepalive_s: float = 75.0
    max_connections: int | None = None  # None: from the open-file limit
    max_connections_per_address: int = 256  # 0: no cap

    @classmethod
    def of(cls, server: ServerConfig) -> FrontLimits:
        return cls(server.header_timeout_s, server.body_timeout_s, server.body_min_rate,
                   server.keepalive_s, server.max_connections,
                   server.max_connections_per_address)

    def connection_cap(self) -> int:
        """``max_connections``, or the derived cap: half of what the open-file limit
        leaves after a reserve (every client connection in flight may hold an upstream
        connection too), at least 64."""
        if self.max_connections is not None:
            return self.max_connections
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return _AUTO_MAX
        return max(64, min(_AUTO_MAX, (soft - _FD_RESERVE) // 2))


FRONT_LIMITS: web.AppKey[FrontLimits] = web.AppKey("front_limits", FrontLimits)


def raise_nofile() -> int:
    """Raises this process's soft open-file limit to its hard limit; returns the soft
    limit now in force (unchanged where the system refuses)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _NOFILE_CAP if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d to %d: %s",
                        soft, target, exc)
    return soft
