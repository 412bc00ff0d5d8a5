"""``GET /admin/v1/advice?since=30d&until=&tenant=T``: the optimisation advisor's
findings (docs/ADVICE.md), the same document as ``tokenplane advise --format json``.
An admin key sees every tenant (``tenant=`` narrows); a tenant's key sees only its own
(naming another is a 403). Read from the advice rollups, off the inference path.

Advice moves slowly (it reads whole days), so each worker keeps an answer for
``max_age_s`` (60 s) per (scope, window to the minute): a console that asks again
within the minute is answered from memory; ``generated_at`` says when it was made."""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
from aiohttp import web

from tokenplane.advice.gateway.source import gather_advice
from tokenplane.api.admin_usage import authenticate, scope_tenant
from tokenplane.errors import invalid
from tokenplane.meta.keystore import KeyStore
from tokenplane.metering.reports import parse_time_bound
from tokenplane.metering.stores.base import LedgerSink

PATH = "/admin/v1/advice"


CacheKey = tuple[str | None, int | None, int | None]
MAX_CACHED = 64


class AdminAdviceRoutes:
    def __init__(self, keys: KeyStore, sink: Callable[[], LedgerSink],
                 clock: Callable[[], float] = time.time, max_age_s: float = 60.0) -> None:
        self.keys = keys
        self.sink = sink
        self.clock = clock
        self.max_age_s = max_age_s
        self._cache: dict[CacheKey, tuple[float, bytes]] = {}

    def install(self, app: web.Application) -> None:
        app.router.add_get(PATH, self.advice)

    def _bound(self, request: web.Request, name: str, now: float) -> float | None:
        raw = request.query.get(name)
        if raw is None or raw == "":
            return None
        try:
            return parse_time_bound(raw, now)
        except ValueError as exc:
            raise invalid(str(exc), param=name) from None

    async def advice(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        tenant = scope_tenant(principal, request.query.get("tenant"))
        now = self.clock()
        since, until = self._bound(request, "since", now), self._bound(request, "until", now)
        if since is not None and until is not None and since >= until:
            raise invalid("'since' must be before 'until'", param="since")
        key = (tenant, None if since is None else int(since // 60),
               None if until is None else int(until // 60))
        hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.max_age_s:
            return web.Response(body=hit[1], content_type="application/json")
        doc = await gather_advice(self.sink(), since=since, until=until, tenant=tenant,
                                  now=now)
        body = orjson.dumps(doc)
        if len(self._cache) >= MAX_CACHED:
            oldest = min(self._cache, key=lambda k: self._cache[k][0])
            del self._cache[oldest]
        self._cache[key] = (now, body)
        return web.Response(body=body, content_type="application/json")
