"""The console by role, over real HTTP: each role lands on its first page, sees in
the navigation exactly the pages auth/roles.py's CONSOLE_RULES give it, is refused
(403) the others, and an inference-only key cannot sign in. The Audit page shows
admin actions beside requests; a page's in-process call to an admin route passes
the same role gate as a call over HTTP."""

from __future__ import annotations

import re

import httpx

from tests.console.conftest import Console
from tests.console.test_console_http import csrf_of
from tokenplane.auth.roles import CONSOLE_RULES, LEGACY, OPERATOR, page_allowed
from tokenplane.console.routes import PAGES

NAV = re.compile(r'href="/console/([a-z]+)"')


def _sign_in(console: Console, h: httpx.Client, key: str) -> httpx.Response:
    form = h.get("/console/login")
    return h.post("/console/login", data={"key": key, "csrf": csrf_of(form.text)},
                  headers={"origin": console.base})


def test_every_console_page_has_a_rule() -> None:
    assert sorted(n for n, _, _ in PAGES) == sorted(CONSOLE_RULES)


def test_each_role_sees_its_pages_only(console: Console) -> None:
    gw = console.gw
    keys = {OPERATOR: console.admin, LEGACY: console.acme,
            **{role: gw.create_key("acme", role=role)
               for role in ("tenant-admin", "viewer", "auditor")}}
    for role, key in keys.items():
        allowed = [n for n, _, _ in PAGES if page_allowed(role, n)]
        with httpx.Client(base_url=console.base, timeout=30) as h:
            r = _sign_in(console, h, key)
            assert r.status_code == 303, (role, r.text[:300])
            assert r.headers["location"] == f"/console/{allowed[0]}"
            landing = h.get(r.headers["location"])
            assert landing.status_code == 200, (role, landing.text[:300])
            shown = {m for m in NAV.findall(landing.text) if m in CONSOLE_RULES}
            assert shown == set(allowed), role
            for name, _, _ in PAGES:
                status = h.get(f"/console/{name}").status_code
                assert status == (200 if name in allowed else 403), (role, name, status)


def test_an_inference_only_key_cannot_sign_in(console: Console) -> None:
    with httpx.Client(base_url=console.base, timeout=30) as h:
        r = _sign_in(console, h, console.gw.create_key("acme", role="inference"))
        assert r.status_code == 403 and 'id="login-error"' in r.text
        assert "console_session" not in r.cookies


def test_the_audit_page_shows_admin_actions(console: Console) -> None:
    with httpx.Client(base_url=console.base, timeout=30,
                      headers={"authorization": f"Bearer {console.admin}"}) as api:
        put = api.put("/admin/v1/limits", json={"target": {"tenant": "acme"},
                                                 "limits": {"rpm": 1000}})
        assert put.status_code == 200, put.text
    with httpx.Client(base_url=console.base, timeout=30) as h:
        _sign_in(console, h, console.admin)
        page = h.get("/console/audit", params={"tenant": "acme"})
        assert page.status_code == 200
        assert "PUT /admin/v1/limits" in page.text
