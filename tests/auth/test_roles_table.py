"""Every admin route has a rule (a route added without one fails here), and every
route answers each role as the rule table says, over real HTTP through the gateway:
the gate refuses a role the rule does not name (403 ``admin_required``, before the
handler runs: nothing changes), and a named role gets past it on its own tenant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.auth.roles import ADMIN_RULES, LEGACY, OPERATOR, ROLES

TENANT = "acme"
PLACEHOLDERS = {"{tenant}": TENANT, "{department}": "rnd", "{app}": "bot",
                "{key_id}": "key_000000000000", "{session_id}": "s1"}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1, profile="instant")
    cfg["tenants"] = [{"name": TENANT}]
    cfg["admission"] = {"limits_reload_s": 0}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("roles"))).start()
    yield g
    g.stop()


def admin_routes(gw: GatewayThread) -> set[tuple[str, str]]:
    assert gw.app is not None
    out = set()
    for route in gw.app.router.routes():
        resource = route.resource
        if resource is None or not resource.canonical.startswith("/admin/"):
            continue
        if route.method == "HEAD":  # aiohttp's automatic HEAD of a GET: gated as the GET
            continue
        out.add((route.method, resource.canonical))
    return out


def test_every_admin_route_has_a_rule_and_every_rule_a_route(gw: GatewayThread) -> None:
    routes = admin_routes(gw)
    assert len(routes) >= 20
    assert sorted(routes - ADMIN_RULES.keys()) == [], "admin routes without a rule"
    assert sorted(ADMIN_RULES.keys() - routes) == [], "rules for routes that do not exist"


def _keys(gw: GatewayThread) -> dict[str, str]:
    keys = {role: gw.create_key(TENANT, role=role) for role in ROLES if role != OPERATOR}
    keys[OPERATOR] = gw.create_key("_operator", admin=True)
    keys[LEGACY] = gw.create_key(TENANT)
    return keys


def test_each_role_on_each_route(gw: GatewayThread) -> None:
    keys = _keys(gw)
    base = gw.base_url.removesuffix("/v1")
    wrong: list[str] = []
    with httpx.Client(base_url=base, timeout=30) as http:
        for (method, pattern), allowed in sorted(ADMIN_RULES.items()):
            path = pattern
            if (method, pattern) == ("DELETE", "/admin/v1/tenants/{tenant}"):
                path = "/admin/v1/tenants/no-such-tenant"  # the keys live in TENANT
            for name, value in PLACEHOLDERS.items():
                path = path.replace(name, value)
            for role, key in keys.items():
                # a body/query the route cannot act on (so a permitted call changes
                # nothing either): 400/404 are fine, only the gate's answer counts
                resp = http.request(method, path, headers={"authorization": f"Bearer {key}"},
                                    content=b"{}" if method in ("POST", "PUT") else None,
                                    params={"tenant": TENANT} if method != "POST" else None)
                refused = (resp.status_code == 403
                           and resp.json()["error"]["code"] == "admin_required")
                expect_refused = role != OPERATOR and role not in allowed
                if refused != expect_refused:
                    wrong.append(f"{method} {pattern} as {role or 'no role'}: "
                                 f"{resp.status_code} {resp.text[:120]}")
    assert wrong == []


def test_a_route_without_a_rule_is_for_operators_only() -> None:
    from tokenplane.auth.roles import route_problem

    assert route_problem(OPERATOR, "GET", "/admin/v1/new-thing") is None
    for role in (*ROLES[1:], LEGACY):
        assert route_problem(role, "GET", "/admin/v1/new-thing") is not None
