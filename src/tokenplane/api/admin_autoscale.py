"""Admin API of the autoscaler (docs/AUTOSCALING_GATEWAY.md).

    GET /admin/v1/autoscale[?pool=ALIAS&limit=N]

``Authorization: Bearer <key>`` with the admin scope (a tenant's key gets 403: the
pools are the whole gateway's). Per pool: its policy and actuator, the replicas by
phase, the last decision (desired serving and warm replicas, its reasons and the
inputs it read) and the demand the gateway measured; then the recent decisions that
changed a pool, newest last (at most ``limit``, 50 by default). ``enabled`` is false
when no pool is configured. ``pool`` names no configured pool: 404.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import orjson
from aiohttp import web

from tokenplane.api.admin_usage import JSON, authenticate
from tokenplane.errors import GatewayError, invalid
from tokenplane.meta.keystore import KeyStore

PATH = "/admin/v1/autoscale"


class AutoscaleView(Protocol):
    """What the route reads of the controller (``autoscale.gateway.controller``)."""

    @property
    def pools(self) -> Mapping[str, object]: ...

    def status(self) -> dict[str, Any]: ...


class AdminAutoscaleRoutes:
    def __init__(self, keys: KeyStore, controller: AutoscaleView | None) -> None:
        self.keys = keys
        self.controller = controller

    def install(self, app: web.Application) -> None:
        app.router.add_get(PATH, self.status)

    async def status(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        if not principal.admin:
            raise GatewayError(403, "This operation needs an API key with the admin scope.",
                               code="admin_required")
        raw = request.query.get("limit", "50")
        if not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= 10_000):
            raise invalid("limit must be an integer from 1 to 10000", param="limit")
        limit = int(raw)
        pool = request.query.get("pool") or None
        ctl = self.controller
        if ctl is None:
            if pool is not None:
                raise _no_pool(pool)
            body: dict[str, Any] = {"object": "autoscale", "enabled": False, "pools": [],
                                    "decisions": []}
            return web.Response(body=orjson.dumps(body), content_type=JSON)
        if pool is not None and pool not in ctl.pools:
            raise _no_pool(pool)
        body = {"object": "autoscale", **ctl.status()}
        if pool is not None:
            body["pools"] = [p for p in body["pools"] if p["pool"] == pool]
            body["decisions"] = [d for d in body["decisions"] if d["pool"] == pool]
        body["decisions"] = body["decisions"][-limit:]
        return web.Response(body=orjson.dumps(body), content_type=JSON)


def _no_pool(pool: str) -> GatewayError:
    return GatewayError(404, f"No autoscaled pool {pool!r}.", code="not_found", param="pool")
