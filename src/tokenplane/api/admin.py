"""The admin API under ``/admin/v1``: tenants, departments, apps, keys, limits, budgets.

Every route needs an API key with the admin scope, except reading a tenant's budget
status, which a key of that tenant may also do (and only for its own tenant).
Errors use OpenAI's envelope. See docs/ADMISSION.md for the routes.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiohttp import web

from tokenplane.admission.gateway.service import AdmissionService
from tokenplane.admission.limits import LimitError, ScopeLimits
from tokenplane.admission.money import money
from tokenplane.admission.outcomes import LimitStatus
from tokenplane.admission.stores.base import StoreUnavailable
from tokenplane.api.admin_fields import (
    check_limits,
    obj,
    only_fields,
    opt_bool,
    opt_expiry,
    opt_name,
    opt_role,
    opt_text,
    req_name,
)
from tokenplane.auth.principal import Principal
from tokenplane.auth.roles import TENANT_ADMIN, VIEWER, grant_problem, role_of, tenant_problem
from tokenplane.errors import GatewayError, invalid
from tokenplane.meta.directory import Directory
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.limit_store import (
    LimitStore,
    LimitTarget,
    budget_micros,
    limits_to_dict,
)
from tokenplane.meta.limit_targets import missing_target
from tokenplane.operations.validate import check_content_type

PREFIX = "/admin/v1"
# the fields of each request body (the only ones accepted; ``api/openapi.py`` publishes
# them with their types)
TARGET_FIELDS = ("tenant", "department", "app", "key_id", "user", "model")
TENANT_BODY = ("name",)
DEPARTMENT_BODY = ("name",)
APP_BODY = ("name", "department")
KEY_BODY = ("department", "app", "name", "admin", "role", "expires_in")
_ANY = ""  # a tenant-wide read: a department-bound key sees its department's part
LIMITS_BODY = ("target", "limits")


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(data), content_type="application/json")


async def _body(request: web.Request) -> dict[str, Any]:
    check_content_type(request.headers.get("content-type"))
    raw = await request.read()
    try:
        data = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        raise invalid("The body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise invalid("The body must be a JSON object.")
    return data


def target_of(data: dict[str, Any], prefix: str | None = None) -> LimitTarget:
    """The target of a limit: every field a string (tenant, department and app names)."""
    only_fields(data, TARGET_FIELDS, prefix)
    return LimitTarget(req_name(data, "tenant", prefix), opt_name(data, "department", prefix),
                       opt_name(data, "app", prefix), opt_text(data, "key_id", prefix),
                       opt_text(data, "user", prefix), opt_text(data, "model", prefix))


def limit_changes(data: dict[str, Any]) -> dict[str, Any]:
    """The limits of a request body; ``budget`` (currency units) becomes micros."""
    changes = dict(data)
    if "budget" in changes:
        amount = changes.pop("budget")
        try:
            changes["budget_micros"] = None if amount is None else budget_micros(amount)
        except LimitError as exc:
            raise invalid(str(exc), param="budget", code="invalid_budget") from None
    return changes


class AdminRoutes:
    def __init__(self, keys: KeyStore, directory: Directory, svc: AdmissionService,
                 limits: LimitStore) -> None:
        self.keys = keys
        self.directory = directory
        self.svc = svc
        self.limits = limits  # the same store the admission service reads

    def install(self, app: web.Application) -> None:
        r = app.router
        r.add_get(f"{PREFIX}/tenants", self.list_tenants)
        r.add_post(f"{PREFIX}/tenants", self.create_tenant)
        r.add_delete(PREFIX + "/tenants/{tenant}", self.delete_tenant)
        r.add_get(PREFIX + "/tenants/{tenant}/departments", self.list_departments)
        r.add_post(PREFIX + "/tenants/{tenant}/departments", self.create_department)
        r.add_delete(PREFIX + "/tenants/{tenant}/departments/{department}",
                     self.delete_department)
        r.add_get(PREFIX + "/tenants/{tenant}/apps", self.list_apps)
        r.add_post(PREFIX + "/tenants/{tenant}/apps", self.create_app)
        r.add_delete(PREFIX + "/tenants/{tenant}/apps/{app}", self.delete_app)
        r.add_get(PREFIX + "/tenants/{tenant}/keys", self.list_keys)
        r.add_post(PREFIX + "/tenants/{tenant}/keys", self.create_key)
        r.add_delete(PREFIX + "/keys/{key_id}", self.revoke_key)
        r.add_get(f"{PREFIX}/limits", self.show_limits)
        r.add_put(f"{PREFIX}/limits", self.set_limits)
        r.add_delete(f"{PREFIX}/limits", self.delete_limits)
        r.add_get(PREFIX + "/tenants/{tenant}/budget", self.budget)

    # --- access -------------------------------------------------------------------
    def _caller(self, request: web.Request) -> Principal:
        auth = request.headers.get("authorization") or ""
        scheme, _, key = auth.partition(" ")
        principal = self.keys.authenticate(key.strip()) if scheme.lower() == "bearer" else None
        if principal is None:
            raise GatewayError(401, "A valid admin API key is required.", code="invalid_api_key")
        return principal

    def _admin(self, request: web.Request, tenant: str | None = None,
               department: str | None = None) -> Principal:
        """The caller, if it may act on ``tenant`` (None: every tenant) and
        ``department``: operators anywhere; the roles the route gate let through
        (api/admin_gate.py) on their own tenant only (auth/roles.py)."""
        principal = self._caller(request)
        if principal.admin:
            return principal
        role = role_of(principal.admin, principal.role)
        if role not in (TENANT_ADMIN, VIEWER):
            raise GatewayError(403, "This operation needs an API key with the admin scope.",
                               code="admin_required")
        # _ANY: a read of the whole tenant, which the handler cuts to the key's department
        problem = tenant_problem(role, principal.tenant, principal.department, tenant,
                                 principal.department if department == _ANY else department)
        if problem is not None:
            raise GatewayError(403, problem, code="forbidden")
        return principal

    def _tenant(self, request: web.Request) -> str:
        tenant = request.match_info["tenant"]
        if not self.directory.has_tenant(tenant):
            raise GatewayError(404, f"No tenant '{tenant}'.", code="tenant_not_found")
        return tenant

    # --- tenants, departments, apps ---------------------------------------------
    async def list_tenants(self, request: web.Request) -> web.Response:
        caller = self._caller(request)
        if caller.admin:
            return _json({"data": self.directory.tenants()})
        self._admin(request, caller.tenant, caller.department)
        return _json({"data": [t for t in self.directory.tenants() if t["name"] == caller.tenant]})

    async def create_tenant(self, request: web.Request) -> web.Response:
        self._admin(request)
        data = await _body(request)
        only_fields(data, TENANT_BODY)
        name = req_name(data, "name")
        if not self.keys.create_tenant(name):  # insert-or-fail: exact under races
            raise GatewayError(409, f"The tenant '{name}' already exists.", param="name",
                               code="already_exists")
        return _json({"name": name}, 201)

    async def delete_tenant(self, request: web.Request) -> web.Response:
        self._admin(request, None)
        tenant = self._tenant(request)
        self.directory.delete_tenant(tenant)
        self.limits.delete_tenant(tenant)
        return _json({"deleted": tenant})

    async def list_departments(self, request: web.Request) -> web.Response:
        caller = self._admin(request, request.match_info["tenant"], _ANY)
        rows = self.directory.departments(self._tenant(request))
        if not caller.admin and caller.department is not None:
            rows = [d for d in rows if d["name"] == caller.department]
        return _json({"data": rows})

    async def create_department(self, request: web.Request) -> web.Response:
        tenant = request.match_info["tenant"]
        self._admin(request, tenant)
        tenant = self._tenant(request)
        data = await _body(request)
        only_fields(data, DEPARTMENT_BODY)
        name = req_name(data, "name")
        self.keys.ensure_scope(tenant, name, None)
        return _json({"tenant": tenant, "name": name}, 201)

    async def delete_department(self, request: web.Request) -> web.Response:
        self._admin(request, request.match_info["tenant"], request.match_info["department"])
        tenant, dept = self._tenant(request), request.match_info["department"]
        if not self.directory.delete_department(tenant, dept):
            raise GatewayError(404, f"No department '{dept}' in '{tenant}'.", code="not_found")
        return _json({"deleted": dept})

    async def list_apps(self, request: web.Request) -> web.Response:
        caller = self._admin(request, request.match_info["tenant"], _ANY)
        apps = self.directory.apps(self._tenant(request))
        if not caller.admin and caller.department is not None:
            apps = [a for a in apps if a.get("department") == caller.department]
        return _json({"data": apps})

    async def create_app(self, request: web.Request) -> web.Response:
        caller = self._admin(request, request.match_info["tenant"], _ANY)
        tenant = self._tenant(request)
        data = await _body(request)
        only_fields(data, APP_BODY)
        name, dept = req_name(data, "name"), opt_name(data, "department")
        self._admin(request, tenant, dept if caller.department is not None else None)
        self.keys.ensure_scope(tenant, dept, name)
        return _json({"tenant": tenant, "department": dept, "name": name}, 201)

    async def delete_app(self, request: web.Request) -> web.Response:
        dept = request.query.get("department") or None
        caller = self._admin(request, request.match_info["tenant"], _ANY)
        self._admin(request, request.match_info["tenant"],
                    dept if caller.department is not None else None)
        tenant, app = self._tenant(request), request.match_info["app"]
        if not self.directory.delete_app(tenant, dept, app):
            raise GatewayError(404, f"No app '{app}' in '{tenant}'.", code="not_found")
        return _json({"deleted": app})

    # --- keys -------------------------------------------------------------------
    async def list_keys(self, request: web.Request) -> web.Response:
        caller = self._admin(request, request.match_info["tenant"], _ANY)
        recs = self.keys.list_keys(self._tenant(request))
        if not caller.admin and caller.department is not None:
            recs = [r for r in recs if r.department == caller.department]
        return _json({"data": [
            {"id": r.id, "prefix": r.prefix, "tenant": r.tenant, "department": r.department,
             "app": r.app, "name": r.name, "admin": r.admin, "role": r.role,
             "created_at": r.created_at, "expires_at": r.expires_at,
             "last_used_at": r.last_used_at, "revoked_at": r.revoked_at} for r in recs]})

    async def create_key(self, request: web.Request) -> web.Response:
        caller = self._admin(request, request.match_info["tenant"], _ANY)
        tenant = self._tenant(request)
        data = await _body(request)
        only_fields(data, KEY_BODY)
        dept, app, name = opt_name(data, "department"), opt_name(data, "app"), \
            opt_name(data, "name", slash=True)
        admin = opt_bool(data, "admin", False)
        role, expires_at = opt_role(data), opt_expiry(data)
        if not caller.admin:
            self._admin(request, tenant, dept if caller.department is not None else None)
            problem = grant_problem(role_of(False, caller.role), role, admin)
            if problem is not None:
                raise GatewayError(403, problem, param="role", code="forbidden")
        key, rec = self.keys.create_key(tenant, dept, app, name, admin, role, expires_at)
        return _json({"id": rec.id, "key": key, "tenant": tenant, "department": rec.department,
                      "app": rec.app, "admin": rec.admin, "role": rec.role,
                      "expires_at": rec.expires_at,
                      "note": "The key is shown once; only its hash is stored."}, 201)

    async def revoke_key(self, request: web.Request) -> web.Response:
        caller = self._caller(request)
        key_id = request.match_info["key_id"]
        if not caller.admin:
            rec = self.keys.get(key_id)
            if rec is None:  # never confirm another tenant's key: same answer as missing
                raise GatewayError(404, f"No active key '{key_id}'.", code="not_found")
            self._admin(request, rec.tenant, rec.department)
        if not self.keys.revoke(key_id):
            raise GatewayError(404, f"No active key '{key_id}'.", code="not_found")
        return _json({"revoked": key_id})

    # --- limits -------------------------------------------------------------------
    async def show_limits(self, request: web.Request) -> web.Response:
        caller = self._caller(request)
        tenant = request.query.get("tenant") or (None if caller.admin else caller.tenant)
        self._admin(request, tenant, _ANY)
        entries = self.limits.entries(tenant)
        if not caller.admin and caller.department is not None:
            entries = [e for e in entries if e.target.department == caller.department]
        return _json({"data": [{"target": e.target.as_dict(), "scope": e.target.scope().label,
                                "limits": self._limits_out(e.limits),
                                "updated_at": e.updated_at}
                               for e in entries]})

    async def set_limits(self, request: web.Request) -> web.Response:
        self._caller(request)
        data = await _body(request)
        only_fields(data, LIMITS_BODY)
        tgt = target_of(obj(data, "target"), "target")
        self._admin(request, tgt.tenant, tgt.department)
        changes = obj(data, "limits")
        check_limits(changes)
        missing = missing_target(tgt, self.directory, self.keys)
        if missing is not None:
            raise GatewayError(404, missing.message, param=f"target.{missing.field}",
                               code="target_not_found")
        try:
            spec = self.limits.set(tgt, limit_changes(changes))
        except LimitError as exc:
            raise invalid(str(exc), param="limits", code="invalid_limit") from None
        self.svc.refresh()
        return _json({"target": tgt.as_dict(), "scope": tgt.scope().label,
                      "limits": self._limits_out(spec)})

    async def delete_limits(self, request: web.Request) -> web.Response:
        self._caller(request)
        tgt = target_of(dict(request.query))
        self._admin(request, tgt.tenant, tgt.department)
        if not self.limits.delete(tgt):
            raise GatewayError(404, f"No limits for {tgt.scope().label}.", code="not_found")
        self.svc.refresh()
        return _json({"deleted": tgt.as_dict()})

    def _limits_out(self, spec: ScopeLimits) -> dict[str, Any]:
        """A scope's limits; a money budget also in the currency (``"budget": "2.50"``,
        ``"currency"``) next to its exact ``budget_micros``."""
        out = limits_to_dict(spec)
        if spec.budget_micros is not None:
            out["budget"] = money(spec.budget_micros)
            out["currency"] = self.svc.currency()
        return out

    # --- budget status ------------------------------------------------------------
    async def budget(self, request: web.Request) -> web.Response:
        caller = self._caller(request)
        tenant = request.match_info["tenant"]
        if not caller.admin and caller.tenant != tenant:  # whatever the role
            # Never confirm another tenant's existence or data.
            raise GatewayError(403, "A key may read its own tenant's budget only.",
                               code="forbidden")
        now = time.time()
        currency = self.svc.currency()
        out: list[dict[str, Any]] = []
        try:
            for e in self.limits.entries(tenant):
                scope = e.target.scope()
                statuses = await self.svc.admission.status(tenant, scope, now)
                out.append({"target": e.target.as_dict(), "scope": scope.label, "limits": [
                    _status_row(s, currency) for s in statuses]})
        except StoreUnavailable as exc:
            raise GatewayError(503, f"The admission store is unreachable: {exc}",
                               code="admission_unavailable") from None
        return _json({"tenant": tenant, "ts": now, "scopes": out})


def _status_row(s: LimitStatus, currency: str) -> dict[str, Any]:
    """One limit's status; money limits also in the currency (``"0.000100"``)."""
    row: dict[str, Any] = {"name": s.limit_name, "kind": s.kind, "unit": s.unit,
                           "limit": s.limit, "spent": s.spent, "reserved": s.reserved,
                           "remaining": s.remaining, "resets_at": s.resets_at}
    if s.unit == "cost_micros":
        row["currency"] = currency
        for name in ("limit", "spent", "reserved", "remaining"):
            row[f"{name}_amount"] = money(row[name])
    return row
