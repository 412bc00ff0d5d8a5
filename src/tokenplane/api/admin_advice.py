"""``GET /admin/v1/advice?since=30d&until=&tenant=T``: the optimisation advisor's
findings (docs/ADVICE.md), the same document as ``tokenplane advise --format json``.
An admin key sees every tenant (``tenant=`` narrows); a tenant's key sees only its own
(naming another is a 403). Read from the advice rollups, off the inference path."""

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


class AdminAdviceRoutes:
    def __init__(self, keys: KeyStore, sink: Callable[[], LedgerSink],
                 clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self.sink = sink
        self.clock = clock

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
        doc = await gather_advice(self.sink(), since=since, until=until, tenant=tenant,
                                  now=now)
        return web.Response(body=orjson.dumps(doc), content_type="application/json")
