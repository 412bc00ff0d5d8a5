"""The role gate in front of every admin route (``/admin/...``): the key's role must
be one that auth/roles.py's :data:`ADMIN_RULES` names for the route's method and
path pattern (operators: every route; a route without a rule: operators only), else
403 ``admin_required``. Which tenant a permitted call may touch is the handler's
check (auth/roles.py :func:`tenant_problem`). A request without a valid key goes on
to the handler, which answers 401 as before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from tokenplane.auth.principal import Principal
from tokenplane.auth.roles import role_of, route_problem
from tokenplane.errors import GatewayError
from tokenplane.meta.keystore import KeyStore

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ADMIN_PREFIX = "/admin/"


def bearer_principal(keys: KeyStore, request: web.Request) -> Principal | None:
    scheme, _, key = (request.headers.get("authorization") or "").partition(" ")
    return keys.authenticate(key.strip()) if scheme.lower() == "bearer" and key else None


def route_pattern(request: web.Request) -> str | None:
    """The matched route's path pattern (``/admin/v1/tenants/{tenant}``), or None."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else None


def gate_problem(keys: KeyStore, request: web.Request) -> str | None:
    """Why this request's key may not call its admin route, or None."""
    pattern = route_pattern(request)
    principal = bearer_principal(keys, request)
    if pattern is None or principal is None:
        return None
    method = "GET" if request.method == "HEAD" else request.method
    return route_problem(role_of(principal.admin, principal.role), method, pattern)


def admin_gate(keys: KeyStore) -> Callable[[web.Request, Handler],
                                           Awaitable[web.StreamResponse]]:
    @web.middleware
    async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(ADMIN_PREFIX):
            problem = gate_problem(keys, request)
            if problem is not None:
                raise GatewayError(403, problem, code="admin_required")
        return await handler(request)
    return gate
