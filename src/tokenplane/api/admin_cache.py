"""Admin API of the response cache (docs/CACHE.md).

    DELETE /admin/v1/cache?tenant=T[&app=A]

Drops the tenant's cached answers, exact and semantic (only app ``A``'s, given one),
in the store every replica shares when it is Redis. An admin key may name any tenant;
a tenant's own key may only name its own. Answers ``{"tenant", "app", "removed"}``.
"""

from __future__ import annotations

import orjson
from aiohttp import web

from tokenplane.api.admin_usage import JSON, authenticate
from tokenplane.cache.gateway.service import ResponseCache
from tokenplane.errors import GatewayError, invalid
from tokenplane.meta.keystore import KeyStore

PATH = "/admin/v1/cache"


class AdminCacheRoutes:
    def __init__(self, keys: KeyStore, cache: ResponseCache | None) -> None:
        self.keys = keys
        self.cache = cache

    def install(self, app: web.Application) -> None:
        app.router.add_delete(PATH, self.invalidate)

    async def invalidate(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        tenant = request.query.get("tenant") or ""
        app = request.query.get("app") or None
        if not tenant:
            raise invalid("Name the tenant whose cached answers to drop: ?tenant=...",
                          param="tenant")
        if not principal.admin and tenant != principal.tenant:
            raise GatewayError(403, "This key may only drop its own tenant's cache.",
                               code="permission_denied", param="tenant")
        removed = await self.cache.invalidate(tenant, app) if self.cache is not None else 0
        body = {"tenant": tenant, "app": app, "removed": removed}
        return web.Response(body=orjson.dumps(body), content_type=JSON)
