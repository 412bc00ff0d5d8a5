"""The upstreams' lists (tools, prompts, resources, resource templates), every page
fetched, reused for ``list_ttl_s`` by every client of this worker."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tokenplane.mcp.gateway.upstream import Upstream
from tokenplane.mcp.listing import LISTS

MAX_PAGES = 100


class Catalog:
    def __init__(self, upstreams: dict[str, Upstream], ttl_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.upstreams = upstreams
        self.ttl_s = ttl_s
        self.clock = clock
        self._lists: dict[tuple[str, str], tuple[list[dict[str, Any]], float]] = {}
        self._names: dict[tuple[str, str], frozenset[str]] = {}

    async def items(self, server: str, method: str) -> list[dict[str, Any]]:
        key = (server, method)
        hit = self._lists.get(key)
        now = self.clock()
        if hit is not None and now - hit[1] < self.ttl_s:
            return hit[0]
        field = LISTS[method][0]
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            result = await self.upstreams[server].request(
                method, {"cursor": cursor} if cursor else None)
            if not isinstance(result, dict):
                break
            out.extend(i for i in result.get(field) or [] if isinstance(i, dict))
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        self._lists[key] = (out, now)
        name_key = LISTS[method][1]
        self._names[key] = frozenset(str(i.get(name_key)) for i in out)
        return out

    def knows(self, server: str, method: str, name: str) -> bool:
        """Whether ``name`` was in ``server``'s last answer to ``method`` (a list method);
        False when this worker has not listed it."""
        names = self._names.get((server, method))
        return names is not None and name in names

    def forget(self, server: str) -> None:
        for key in [k for k in self._lists if k[0] == server]:
            del self._lists[key]
            self._names.pop(key, None)
