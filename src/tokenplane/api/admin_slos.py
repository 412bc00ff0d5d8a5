"""Admin API for service-level objectives (docs/SLO.md).

    GET /admin/v1/slos[?tenant=T]

``Authorization: Bearer <key>``. An admin key sees every SLO (``tenant=`` narrows to
the SLOs whose selector names that tenant); any other key sees only the SLOs whose
selector names its own tenant, never one over every tenant (it would show the others'
traffic), and naming another tenant is refused with 403. Per SLO: its selector,
objective and window, and per SLI the SLI over the window, the error budget left (as a
share and in bad events), the burn rate over each alert window and the alerts firing.
An admin key also gets ``canary_guards``: each guarded split, whether it tripped, and
the last decision with its evidence.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tokenplane.api.admin_usage import JSON, authenticate, scope_tenant
from tokenplane.meta.keystore import KeyStore
from tokenplane.slo.canary import CanaryGuardSpec
from tokenplane.slo.canary_guards import GuardDecision
from tokenplane.slo.gateway.service import SloService

PATH = "/admin/v1/slos"


def _guard(decision: GuardDecision | None, spec: CanaryGuardSpec) -> dict[str, object]:
    if decision is not None:
        return decision.as_dict()
    return {"alias": spec.alias, "slo": spec.slo, "stable": spec.stable,
            "canary": spec.canary, "rolled_back": False, "at": None, "evidence": None}


class AdminSloRoutes:
    def __init__(self, keys: KeyStore, service: SloService | None) -> None:
        self.keys = keys
        self.service = service

    def install(self, app: web.Application) -> None:
        app.router.add_get(PATH, self.slos)

    async def slos(self, request: web.Request) -> web.Response:
        principal = authenticate(self.keys, request)
        tenant = scope_tenant(principal, request.query.get("tenant"))
        svc = self.service
        data: list[dict[str, Any]] = []
        if svc is not None:
            rows = svc.status(tenant=tenant)
            by_slo: dict[str, list[dict[str, object]]] = {}
            for row in rows:
                d = row.as_dict()
                del d["slo"], d["objective"], d["window_s"]
                by_slo.setdefault(row.slo, []).append(d)
            for slo in svc.slos:
                if slo.name in by_slo:
                    sel = slo.selector
                    data.append({
                        "name": slo.name,
                        "description": slo.description,
                        "selector": {k: v for k, v in (
                            ("model", sel.model), ("tenant", sel.tenant),
                            ("department", sel.department), ("app", sel.app),
                            ("slo_class", sel.slo_class)) if v is not None},
                        "objective": slo.objective,
                        "window_s": slo.window_s,
                        "slis": by_slo[slo.name],
                    })
        body: dict[str, Any] = {"object": "list", "data": data,
                                "evaluated_at": svc.refreshed_at if svc is not None else None}
        if principal.admin and svc is not None and svc.guards is not None:
            g = svc.guards
            body["canary_guards"] = [
                {**_guard(g.tripped.get(spec.alias) or g.latest.get(spec.alias), spec),
                 "tripped": spec.alias in g.tripped}
                for spec, _ in g.guards
            ]
        return web.Response(body=orjson.dumps(body), content_type=JSON)
