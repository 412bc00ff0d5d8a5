"""Admin API for agent sessions, read from the ledger (off the inference path).

    GET /admin/v1/sessions?since=&until=&tenant=&order=cost|tokens|steps|recent&limit=20
    GET /admin/v1/sessions/{id}?tenant=T

``Authorization: Bearer <key>``. An admin key sees every tenant (``tenant=`` narrows;
a session id two tenants used needs it); any other key sees only its own tenant's
sessions: another tenant's session is a 404, as if it did not exist. A session's answer
also holds ``tool_costs``: the MCP calls whose results its steps carried, and each tool's
share of its input tokens (from the audit log; docs/MCP.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson
from aiohttp import web

from tokenplane.api.admin_usage import JSON, _bound, _format, _int, authenticate, scope_tenant
from tokenplane.errors import GatewayError, invalid
from tokenplane.mcp.gateway.session_tools import session_tool_costs
from tokenplane.meta.keystore import KeyStore
from tokenplane.metering.reports import format_rows
from tokenplane.metering.session_reports import (
    SESSION_ORDERS,
    costliest_sessions,
    session_report,
)
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.sessions.ids import check_session_id

PREFIX = "/admin/v1/sessions"


class AdminSessionRoutes:
    def __init__(self, keys: KeyStore, sink: Callable[[], LedgerSink],
                 clock: Callable[[], float] = time.time, audit: Path | None = None) -> None:
        self.keys = keys
        self.sink = sink
        self.clock = clock
        self.audit = audit  # the audit log's root: the MCP calls behind the steps

    def install(self, app: web.Application) -> None:
        app.router.add_get(PREFIX, self.sessions)
        app.router.add_get(PREFIX + "/{session_id}", self.session)

    async def sessions(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        tenant = scope_tenant(principal, request.query.get("tenant"))
        fmt = _format(request)
        now = self.clock()
        since, until = _bound(request, "since", now), _bound(request, "until", now)
        order = request.query.get("order", "cost")
        if order not in SESSION_ORDERS:
            raise invalid(f"'order' must be one of {', '.join(SESSION_ORDERS)}", param="order")
        limit = _int(request, "limit", 20, 1, 10_000)
        rows = await costliest_sessions(self.sink(), tenant, since, until, limit, order)
        if fmt == "csv":
            return web.Response(text=format_rows(rows, "csv") if rows else "",
                                content_type="text/csv")
        body = {"object": "list", "data": rows, "order": order, "since": since,
                "until": until, "tenant": tenant}
        return web.Response(body=orjson.dumps(body), content_type=JSON)

    async def session(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        tenant = scope_tenant(principal, request.query.get("tenant"))
        session_id = check_session_id(request.match_info["session_id"], "session_id")
        found = await session_report(self.sink(), session_id, tenant)
        if not found:
            raise GatewayError(404, f"No session '{session_id}' in the ledger"
                               + ("" if principal.admin else " for this key's tenant") + ".",
                               code="session_not_found", param="session_id")
        if len(found) > 1:
            raise invalid(f"Session '{session_id}' exists in {len(found)} tenants: name one "
                          "with tenant=", param="tenant", code="ambiguous_session")
        report = found[0]
        if self.audit is not None:  # which tool's results the steps carried (docs/MCP.md)
            report["tool_costs"] = await session_tool_costs(self.sink(), self.audit,
                                                            session_id, report["tenant"])
        return web.Response(body=orjson.dumps(report), content_type=JSON)
