"""The role gate in front of every admin route (``/admin/...``), and the admin action
log.

The gate: the key's role must be one that auth/roles.py's :data:`ADMIN_RULES` names
for the route's method and path pattern (operators: every route; a route without a
rule: operators only), else 403 ``admin_required`` before the handler runs. Which
tenant a permitted call may touch is the handler's check (auth/roles.py
:func:`tenant_problem`). A request without a valid key goes on to the handler, which
answers 401 as before.

The log: every admin request that may change something (not GET or HEAD) by a valid
key, allowed or refused, becomes a ``kind: admin`` record of the tamper-evident
audit log (governance/audit/admin_action.py): who (key, role), what (method, route,
path parameters, query, JSON body), on which tenant, and the answer's status.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from tokenplane.api.openai_routes import REQUEST_ID
from tokenplane.auth.principal import Principal
from tokenplane.auth.roles import role_of, route_problem
from tokenplane.errors import GatewayError
from tokenplane.governance.audit.admin_action import AdminAction
from tokenplane.governance.audit.service import AuditService
from tokenplane.meta.keystore import KeyStore

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ADMIN_PREFIX = "/admin/"
READS = ("GET", "HEAD", "OPTIONS")
MAX_BODY_LOGGED = 16 * 1024  # a larger body is recorded by its size only


def bearer_principal(keys: KeyStore, request: web.Request) -> Principal | None:
    scheme, _, key = (request.headers.get("authorization") or "").partition(" ")
    return keys.authenticate(key.strip()) if scheme.lower() == "bearer" and key else None


def route_pattern(request: web.Request) -> str | None:
    """The matched route's path pattern (``/admin/v1/tenants/{tenant}``), or None."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else None


async def _params(request: web.Request) -> dict[str, Any]:
    out: dict[str, Any] = {"path": dict(request.match_info)}
    if request.query:
        out["query"] = dict(request.query)
    if request.can_read_body or request.body_exists:
        raw = await request.read()  # aiohttp keeps it: the handler read it already
        if len(raw) > MAX_BODY_LOGGED:
            out["body_bytes"] = len(raw)
        elif raw:
            try:
                out["body"] = orjson.loads(raw)
            except orjson.JSONDecodeError:
                out["body_bytes"] = len(raw)
    return out


def _tenant_of(params: dict[str, Any], caller: Principal) -> str:
    """The tenant an action is about: the path's, the query's, the body's target's,
    else the caller's own."""
    body = params.get("body")
    target = body.get("target") if isinstance(body, dict) else None
    for candidate in (params["path"].get("tenant"), params.get("query", {}).get("tenant"),
                      target.get("tenant") if isinstance(target, dict) else None):
        if isinstance(candidate, str) and candidate:
            return candidate
    return caller.tenant


def admin_gate(keys: KeyStore, audit: Callable[[], AuditService | None] = lambda: None,
               clock: Callable[[], float] = time.time
               ) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """The middleware; ``audit`` gives the audit service (None: actions not logged)."""

    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(ADMIN_PREFIX):
            return await handler(request)
        pattern = route_pattern(request)
        caller = bearer_principal(keys, request)
        if pattern is None or caller is None:
            return await handler(request)
        role = role_of(caller.admin, caller.role)
        method = "GET" if request.method == "HEAD" else request.method
        service = audit() if method not in READS else None
        status = 500
        try:
            problem = route_problem(role, method, pattern)
            if problem is not None:
                raise GatewayError(403, problem, code="admin_required")
            resp = await handler(request)
            status = resp.status
            return resp
        except GatewayError as err:
            status = err.status
            raise
        finally:
            if service is not None:
                params = await _params(request)
                service.submit(AdminAction(
                    request_id=str(request.get(REQUEST_ID, "")), tenant=_tenant_of(params, caller),
                    key_id=caller.key_id, principal=caller.key_id, app=caller.app,
                    status=status, verdict="allow" if status < 400 else "block",
                    action=f"{method} {pattern}", role=role, params=params), clock())
    return gate
