"""Admin API over the audit log (off the inference path).

    GET /admin/v1/audit?tenant=&key_id=&app=&since=&until=&verdict=allow|flag|block&limit=100

``Authorization: Bearer <key>``. An admin key reads every tenant (``tenant=`` narrows);
any other key reads only its own tenant's records: the filter is forced and naming
another tenant is a 403. Records come newest first with their hashes; their content
is what the retention mode kept (redacted by default, encrypted for ``full``).
The newest records are read from the end of each worker's log (``audit.recent``),
so a search costs what it returns, not the size of the log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
from aiohttp import web

from tokenplane.auth.roles import sees_every_tenant_audit
from tokenplane.errors import GatewayError, invalid
from tokenplane.governance.audit.filters import AuditFilter
from tokenplane.governance.audit.multi import VERDICTS
from tokenplane.governance.audit.recent import newest_matching
from tokenplane.meta.keystore import KeyStore
from tokenplane.metering.reports import parse_time_bound

PATH = "/admin/v1/audit"
AUDIT_KINDS = ("request", "admin", "all")  # ?kind=: requests (default), admin actions, both


def _bound(request: web.Request, name: str, now: float) -> float | None:
    raw = request.query.get(name)
    if not raw:
        return None
    try:
        return parse_time_bound(raw, now)
    except ValueError as exc:
        raise invalid(str(exc), param=name) from None


def _limit(request: web.Request) -> int:
    raw = request.query.get("limit") or "100"
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise invalid("'limit' must be an integer between 1 and 1000", param="limit")
    return int(raw)


class AdminAuditRoutes:
    """``root``: ``<data_dir>/audit``; ``flush`` writes this worker's buffered records
    first, so a search sees every request that has ended."""

    def __init__(self, keys: KeyStore, root: Path,
                 flush: Callable[[], Awaitable[None]] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.keys = keys
        self.root = root
        self.flush = flush
        self.clock = clock

    def install(self, app: web.Application) -> None:
        app.router.add_get(PATH, self.search)

    async def search(self, request: web.Request) -> web.Response:
        auth = request.headers.get("authorization") or ""
        scheme, _, key = auth.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise GatewayError(401, "You didn't provide an API key. Send it as 'Authorization: "
                               "Bearer <key>'.", code="missing_api_key")
        principal = self.keys.authenticate(key.strip())
        if principal is None:
            raise GatewayError(401, "Incorrect API key provided.", code="invalid_api_key")
        asked = request.query.get("tenant") or None
        if principal.admin or sees_every_tenant_audit(principal.role, principal.tenant):
            tenant = asked
        elif asked and asked != principal.tenant:
            raise GatewayError(403, "This key may only read its own tenant's audit records.",
                               code="permission_denied", param="tenant")
        else:
            tenant = principal.tenant
        verdict = request.query.get("verdict") or None
        if verdict is not None and verdict not in VERDICTS:
            raise invalid(f"'verdict' must be one of {', '.join(VERDICTS)}", param="verdict")
        now = self.clock()
        since, until = _bound(request, "since", now), _bound(request, "until", now)
        limit = _limit(request)
        kind = request.query.get("kind") or "request"
        if kind not in AUDIT_KINDS:
            raise invalid(f"'kind' must be one of {', '.join(AUDIT_KINDS)}", param="kind")
        key_id = request.query.get("key_id") or None
        app_name = request.query.get("app") or None
        if self.flush is not None:
            await self.flush()

        def run() -> tuple[list[dict[str, object]], bool]:
            return newest_matching(self.root, AuditFilter(
                tenant=tenant, key_id=key_id, since=since, until=until, verdict=verdict,
                app=app_name, admin_actions=kind != "request", requests=kind != "admin"),
                limit)

        data, more = await asyncio.to_thread(run)
        body = {"object": "list", "data": data, "has_more": more}
        return web.Response(body=orjson.dumps(body), content_type="application/json")
