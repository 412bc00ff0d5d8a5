"""Admin API for usage reports, read from the ledger's rollups (off the inference path).

    GET /admin/v1/usage?by=tenant,app&since=7d&until=...&tenant=T&format=json|csv
    GET /admin/v1/usage/sources?since=&until=&tenant=&format=
    GET /admin/v1/usage/prompts?min_requests=2&limit=50&tenant=&format=
    GET /admin/v1/usage/top?by=app&order=cost|tokens&limit=10&since=&until=&tenant=&format=
    GET /admin/v1/usage/clients?by=tenant,app&since=&until=&tenant=&format=

``Authorization: Bearer <key>``. An admin key sees every tenant (``tenant=`` narrows);
any other key sees only its own tenant: the filter is forced, and naming another tenant
is refused with 403, so no other tenant's names or numbers ever leave. Errors use
OpenAI's envelope. ``since`` / ``until``: epoch seconds, an ISO date or time (UTC), or
an age such as ``24h`` / ``7d`` (see ``metering.reports.parse_time_bound``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tokenplane.auth.principal import Principal
from tokenplane.errors import GatewayError, invalid
from tokenplane.meta.keystore import KeyStore
from tokenplane.metering.client_reports import CLIENT_DIMENSIONS, client_report
from tokenplane.metering.report_views import add_cacheable_tokens
from tokenplane.metering.reports import (
    REPORT_DIMENSIONS,
    fingerprint_report,
    format_rows,
    parse_time_bound,
    token_source_report,
    top_consumers,
    usage_report,
)
from tokenplane.metering.stores.base import LedgerSink

PREFIX = "/admin/v1/usage"
JSON = "application/json"


def authenticate(keys: KeyStore, request: web.Request) -> Principal:
    auth = request.headers.get("authorization") or ""
    scheme, _, key = auth.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise GatewayError(401, "You didn't provide an API key. Send it as 'Authorization: "
                           "Bearer <key>'.", code="missing_api_key")
    principal = keys.authenticate(key)
    if principal is None:
        raise GatewayError(401, "Incorrect API key provided.", code="invalid_api_key")
    return principal


def scope_tenant(principal: Principal, asked: str | None) -> str | None:
    """The tenant filter to apply: anything an admin asks (None: all tenants); a
    tenant's key is pinned to its own tenant and may not name another."""
    if principal.admin:
        return asked or None
    if asked and asked != principal.tenant:
        raise GatewayError(403, "This key may only read its own tenant's usage.",
                           code="permission_denied", param="tenant")
    return principal.tenant


def _bound(request: web.Request, name: str, now: float) -> float | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return parse_time_bound(raw, now)
    except ValueError as exc:
        raise invalid(str(exc), param=name) from None


def _int(request: web.Request, name: str, default: int, lo: int, hi: int) -> int:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise invalid(f"'{name}' must be an integer", param=name) from None
    if not lo <= value <= hi:
        raise invalid(f"'{name}' must be between {lo} and {hi}", param=name)
    return value


def _by(request: web.Request, default: str) -> list[str]:
    parts = [p.strip() for raw in request.query.getall("by", [default]) for p in raw.split(",")]
    dims = [p for p in parts if p]
    unknown = [d for d in dims if d not in REPORT_DIMENSIONS]
    if unknown or not dims:
        raise invalid(f"cannot group by {unknown or dims}; choose from "
                      f"{', '.join(REPORT_DIMENSIONS)}", param="by")
    return dims


def _format(request: web.Request) -> str:
    fmt = request.query.get("format", "json")
    if fmt not in ("json", "csv"):
        raise invalid("'format' must be json or csv", param="format")
    return fmt


class AdminUsageRoutes:
    """Installs the ``/admin/v1/usage`` endpoints; ``sink`` gives the ledger sink."""

    def __init__(self, keys: KeyStore, sink: Callable[[], LedgerSink],
                 clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self.sink = sink
        self.clock = clock

    def install(self, app: web.Application) -> None:
        app.router.add_get(PREFIX, self.usage)
        app.router.add_get(PREFIX + "/sources", self.sources)
        app.router.add_get(PREFIX + "/prompts", self.prompts)
        app.router.add_get(PREFIX + "/top", self.top)
        app.router.add_get(PREFIX + "/clients", self.clients)

    def _common(self, request: web.Request) -> tuple[str | None, float | None, float | None, str]:
        principal = authenticate(self.keys, request)
        tenant = scope_tenant(principal, request.query.get("tenant"))
        now = self.clock()
        fmt = _format(request)
        return tenant, _bound(request, "since", now), _bound(request, "until", now), fmt

    async def usage(self, request: web.Request) -> web.Response:
        tenant, since, until, fmt = self._common(request)
        by = _by(request, "tenant")
        rows = await usage_report(self.sink(), by, since, until, tenant)
        return _reply(rows, fmt, {"by": by, "since": since, "until": until, "tenant": tenant})

    async def sources(self, request: web.Request) -> web.Response:
        tenant, since, until, fmt = self._common(request)
        rows = await token_source_report(self.sink(), since, until, tenant)
        return _reply(rows, fmt, {"since": since, "until": until, "tenant": tenant})

    async def prompts(self, request: web.Request) -> web.Response:
        tenant, _, _, fmt = self._common(request)
        min_requests = _int(request, "min_requests", 2, 1, 1 << 31)
        limit = _int(request, "limit", 50, 1, 10_000)
        rows = add_cacheable_tokens(
            await fingerprint_report(self.sink(), tenant, min_requests, limit))
        return _reply(rows, fmt, {"tenant": tenant, "min_requests": min_requests})

    async def top(self, request: web.Request) -> web.Response:
        tenant, since, until, fmt = self._common(request)
        by = _by(request, "tenant")
        if len(by) != 1 or by[0] == "day":
            raise invalid("'by' must be one of tenant, department, app, model, key", param="by")
        order = request.query.get("order", "cost")
        if order not in ("cost", "tokens"):
            raise invalid("'order' must be cost or tokens", param="order")
        limit = _int(request, "limit", 10, 1, 10_000)
        rows = await top_consumers(self.sink(), by[0], since, until, tenant, limit, order)
        return _reply(rows, fmt, {"by": by[0], "order": order, "since": since,
                                  "until": until, "tenant": tenant})

    async def clients(self, request: web.Request) -> web.Response:
        """Requests, tokens and cost by API and client (day rollups), with shares."""
        tenant, since, until, fmt = self._common(request)
        parts = [p.strip() for raw in request.query.getall("by", []) for p in raw.split(",")]
        by = list(dict.fromkeys(p for p in parts if p))
        if any(d not in CLIENT_DIMENSIONS for d in by):
            raise invalid("'by' must name tenant and/or app", param="by")
        rows = await client_report(self.sink(), since, until, tenant, by)
        return _reply(rows, fmt, {"by": by, "since": since, "until": until, "tenant": tenant})


def _reply(rows: list[dict[str, Any]], fmt: str, meta: dict[str, Any]) -> web.Response:
    if fmt == "csv":
        return web.Response(text=format_rows(rows, "csv") if rows else "",
                            content_type="text/csv")
    body = {"object": "list", "data": rows, **meta}
    return web.Response(body=orjson.dumps(body), content_type=JSON)
