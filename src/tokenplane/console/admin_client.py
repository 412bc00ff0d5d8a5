"""Reads the gateway's own admin API in-process, as the signed-in key.

A page that shows what an admin route answers (SLOs, audit, sessions, autoscaling,
advice) asks that route's handler directly, with the session's key in the
``Authorization`` header: the same scoping (a tenant's key sees its tenant only), the
same numbers, and nothing to keep in step. A route this gateway lacks answers 404
(the page says the feature is not available here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from tokenplane.auth.roles import role_of, route_problem
from tokenplane.errors import GatewayError
from tokenplane.meta.keystore import KeyStore


@dataclass(frozen=True, slots=True)
class AdminAnswer:
    status: int
    data: Any  # the JSON body (the error envelope's ``error`` object on failure)

    @property
    def ok(self) -> bool:
        return self.status == 200


async def admin_get(request: web.Request, key: str, path: str,
                    query: dict[str, str] | None = None,
                    keys: KeyStore | None = None) -> AdminAnswer:
    """GET ``path`` (``/admin/v1/...``) through this app's router as ``key``; with
    ``keys``, the role gate of the admin routes first (api/admin_gate.py: an
    in-process call does not pass the app's middlewares)."""
    url = URL.build(path=path, query={k: v for k, v in (query or {}).items() if v})
    headers = CIMultiDict({"Authorization": f"Bearer {key}", "Accept": "application/json"})
    inner = request.clone(method="GET", rel_url=url, headers=headers)
    match = await request.app.router.resolve(inner)
    if match.http_exception is not None:
        return AdminAnswer(match.http_exception.status, {"message": "not available"})
    inner._match_info = match  # what the app's own dispatch sets before the handler
    match.add_app(request.app)
    principal = keys.authenticate(key) if keys is not None else None
    resource = match.route.resource
    if principal is not None and resource is not None:
        problem = route_problem(role_of(principal.admin, principal.role), "GET",
                                resource.canonical)
        if problem is not None:
            return AdminAnswer(403, {"message": problem, "code": "admin_required"})
    try:
        resp = await match.handler(inner)
    except GatewayError as err:
        return AdminAnswer(err.status, {"message": err.message, "code": err.code})
    if not isinstance(resp, web.Response) or resp.body is None:
        return AdminAnswer(500, {"message": "unexpected answer"})
    body = resp.body
    raw = body if isinstance(body, bytes) else getattr(body, "_value", b"")
    return AdminAnswer(resp.status, orjson.loads(raw) if raw else None)
