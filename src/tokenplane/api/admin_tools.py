"""Admin API of the MCP gateway's tools (docs/MCP.md), read from the audit log.

    GET /admin/v1/tools?since=24h&until=&tenant=T&by_app=true

Calls, denials, failures, truncations, result tokens and latency by tool (and app), the
most result tokens first. An admin key sees every tenant (``tenant=`` narrows); any
other key its own tenant only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from tokenplane.api.admin_usage import JSON, _bound, authenticate, scope_tenant
from tokenplane.governance.audit.multi import log_dirs
from tokenplane.governance.audit.segments import iter_records
from tokenplane.mcp.usage import tool_usage
from tokenplane.meta.keystore import KeyStore

PATH = "/admin/v1/tools"
DEFAULT_SPAN_S = 86_400.0


def _rows(root: Path, tenant: str | None, since: float, until: float | None,
          by_app: bool) -> list[dict[str, Any]]:
    first = time.strftime("%Y%m%d", time.gmtime(since))
    last = time.strftime("%Y%m%d", time.gmtime(until)) if until is not None else None
    records = (r for d in log_dirs(root) for r in iter_records(d, first, last)
               if r.get("kind") == "mcp" and float(r.get("ts") or 0) >= since
               and (until is None or float(r.get("ts") or 0) < until))
    return tool_usage(records, tenant=tenant, by_app=by_app)


class AdminToolsRoutes:
    def __init__(self, keys: KeyStore, audit: Path | None, flush: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self.audit = audit
        self.flush = flush  # the audit writer's flush: the newest calls count
        self.clock = clock

    def install(self, app: web.Application) -> None:
        app.router.add_get(PATH, self.tools)

    async def tools(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        tenant = scope_tenant(principal, request.query.get("tenant"))
        now = self.clock()
        since = _bound(request, "since", now)
        until = _bound(request, "until", now)
        by_app = request.query.get("by_app", "true").lower() not in ("false", "0", "no")
        start = since if since is not None else now - DEFAULT_SPAN_S
        rows: list[dict[str, Any]] = []
        if self.audit is not None:
            if self.flush is not None:
                await self.flush()
            rows = await asyncio.to_thread(_rows, self.audit, tenant, start, until, by_app)
        body = {"object": "list", "data": rows, "since": start, "until": until,
                "tenant": tenant}
        return web.Response(body=orjson.dumps(body), content_type=JSON)
