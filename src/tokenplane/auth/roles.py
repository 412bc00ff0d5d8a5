"""Operators' roles and key scopes, and which of them may call each admin route.

A key has one role:

- ``operator``: everything, every tenant (the keys ``admin: true`` had, the first
  start's key among them);
- ``tenant-admin``: its own tenant's departments, apps, keys, limits, budgets, usage,
  SLO views, sessions and advice (a key bound to a department: that department's
  keys and limits only);
- ``viewer``: read-only, its own tenant: usage, budgets, limits, SLOs, sessions,
  advice, the console;
- ``auditor``: the audit log (its own tenant's; an auditor of the operator's tenant
  ``_operator`` reads every tenant's) and the compliance views;
- ``inference``: the inference API only, no admin route at all;
- none (a key made before roles existed, or without ``--role``): the inference API
  and the self-service reads a tenant key always had (its own tenant's budget,
  usage, sessions, SLOs, advice and audit records, its own cache entries).

``viewer`` and ``auditor`` keys cannot call the inference API (read-only scope).

:data:`ADMIN_RULES` names, for every admin route (method and path pattern), the
roles besides ``operator`` that may call it; a route missing from it is refused to
all but operators, and tests/auth/test_roles_table.py fails when the application has
an admin route with no rule. Which tenant a permitted call may touch is decided by
:func:`tenant_problem`. Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

OPERATOR: Final = "operator"
TENANT_ADMIN: Final = "tenant-admin"
VIEWER: Final = "viewer"
AUDITOR: Final = "auditor"
INFERENCE: Final = "inference"
ROLES: Final = (OPERATOR, TENANT_ADMIN, VIEWER, AUDITOR, INFERENCE)
LEGACY: Final = ""  # a key without a role (the table's name for it)
OPERATOR_TENANT: Final = "_operator"  # the operator's own tenant (serve's first key)

_SELF = frozenset({TENANT_ADMIN, VIEWER, LEGACY})  # a tenant's own reads
_MANAGE = frozenset({TENANT_ADMIN})

ADMIN_RULES: Final[dict[tuple[str, str], frozenset[str]]] = {
    ("GET", "/admin/v1/tenants"): frozenset({TENANT_ADMIN, VIEWER}),
    ("POST", "/admin/v1/tenants"): frozenset(),
    ("DELETE", "/admin/v1/tenants/{tenant}"): frozenset(),
    ("GET", "/admin/v1/tenants/{tenant}/departments"): frozenset({TENANT_ADMIN, VIEWER}),
    ("POST", "/admin/v1/tenants/{tenant}/departments"): _MANAGE,
    ("DELETE", "/admin/v1/tenants/{tenant}/departments/{department}"): _MANAGE,
    ("GET", "/admin/v1/tenants/{tenant}/apps"): frozenset({TENANT_ADMIN, VIEWER}),
    ("POST", "/admin/v1/tenants/{tenant}/apps"): _MANAGE,
    ("DELETE", "/admin/v1/tenants/{tenant}/apps/{app}"): _MANAGE,
    ("GET", "/admin/v1/tenants/{tenant}/keys"): _MANAGE,
    ("POST", "/admin/v1/tenants/{tenant}/keys"): _MANAGE,
    ("DELETE", "/admin/v1/keys/{key_id}"): _MANAGE,
    ("GET", "/admin/v1/limits"): frozenset({TENANT_ADMIN, VIEWER}),
    ("PUT", "/admin/v1/limits"): _MANAGE,
    ("DELETE", "/admin/v1/limits"): _MANAGE,
    ("GET", "/admin/v1/tenants/{tenant}/budget"): _SELF,
    ("GET", "/admin/v1/usage"): _SELF,
    ("GET", "/admin/v1/usage/sources"): _SELF,
    ("GET", "/admin/v1/usage/prompts"): _SELF,
    ("GET", "/admin/v1/usage/top"): _SELF,
    ("GET", "/admin/v1/usage/clients"): _SELF,
    ("GET", "/admin/v1/tools"): _SELF,
    ("GET", "/admin/v1/sessions"): _SELF,
    ("GET", "/admin/v1/sessions/{session_id}"): _SELF,
    ("GET", "/admin/v1/advice"): _SELF,
    ("GET", "/admin/v1/slos"): _SELF,
    ("DELETE", "/admin/v1/cache"): frozenset({TENANT_ADMIN, LEGACY}),
    ("GET", "/admin/v1/autoscale"): frozenset(),
    ("GET", "/admin/v1/audit"): frozenset({AUDITOR, LEGACY}),
}

# the console's pages (console/routes.py PAGES) and the roles besides operator that may
# open each; a page missing here is for operators only
_PAGES_SELF = frozenset({TENANT_ADMIN, VIEWER, LEGACY})
CONSOLE_RULES: Final[dict[str, frozenset[str]]] = {
    "overview": _PAGES_SELF, "usage": _PAGES_SELF, "budgets": _PAGES_SELF,
    "slos": _PAGES_SELF, "sessions": _PAGES_SELF, "versions": _PAGES_SELF,
    "advice": _PAGES_SELF, "cluster": frozenset(), "audit": frozenset({AUDITOR, LEGACY}),
    "tools": _PAGES_SELF,
}


def page_allowed(role: str, page: str) -> bool:
    """Whether a key of ``role`` may open the console page ``page``."""
    return role == OPERATOR or role in CONSOLE_RULES.get(page, frozenset())


# the roles a tenant-admin may give the keys it creates (never more than its own)
GRANTABLE_BY_TENANT_ADMIN: Final = frozenset({TENANT_ADMIN, VIEWER, AUDITOR, INFERENCE, LEGACY})


def role_of(admin: bool, role: str | None) -> str:
    """The effective role of a key: ``operator`` for an admin key, else its role
    (:data:`LEGACY` for none)."""
    return OPERATOR if admin else (role or LEGACY)


def check_role(role: str | None) -> str | None:
    """None if ``role`` is a role (or None), else why not."""
    if role is None or role in ROLES:
        return None
    return f"unknown role {role!r} (one of {', '.join(ROLES)})"


def route_problem(role: str, method: str, path: str) -> str | None:
    """Why a key of ``role`` may not call the admin route (method, path pattern), or
    None if it may. A route with no rule is for operators only."""
    if role == OPERATOR:
        return None
    allowed = ADMIN_RULES.get((method.upper(), path))
    if allowed is not None and role in allowed:
        return None
    shown = f"the role '{role}'" if role else "a key without a role"
    needs = sorted({OPERATOR, *(allowed or ())} - {LEGACY})
    return (f"{method.upper()} {path} is not allowed for {shown}; it needs "
            + " or ".join(f"'{r}'" for r in needs) + ".")


def tenant_problem(role: str, own_tenant: str, own_department: str | None,
                   tenant: str | None, department: str | None = None) -> str | None:
    """Whether a call permitted by its route may touch ``tenant`` (None: every
    tenant, a global operation) and ``department``."""
    if role == OPERATOR:
        return None
    if tenant is None or tenant != own_tenant:
        return "A key of a tenant may act on its own tenant only."
    if own_department is not None and role == TENANT_ADMIN and department != own_department:
        return f"This key is bound to the department '{own_department}'."
    return None


def sees_every_tenant_audit(role: str | None, tenant: str) -> bool:
    """An auditor of the operator's own tenant reads every tenant's audit records."""
    return role == AUDITOR and tenant == OPERATOR_TENANT


def inference_problem(role: str) -> str | None:
    """Why a key may not call the inference API (read-only roles), or None."""
    if role in (VIEWER, AUDITOR):
        return f"A key with the role '{role}' is read-only: it cannot call the inference API."
    return None


def grant_problem(granter: str, role: str | None, admin: bool) -> str | None:
    """Whether a key of role ``granter`` may create a key with ``role``/``admin``."""
    if granter == OPERATOR:
        return None
    if admin or (role or LEGACY) not in GRANTABLE_BY_TENANT_ADMIN:
        return "A tenant-admin cannot create operator keys."
    return None
