"""The console's routes under ``/console``: sign-in and out, the language switch, the
pages, the Usage CSV and the static files (docs/CONSOLE.md).

Every page checks the session cookie and then the key inside it (a revoked key ends
the session); every POST carries the session's CSRF token and comes from this host.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import jinja2
import orjson
from aiohttp import web

from tokenplane.auth.principal import Principal
from tokenplane.auth.roles import OPERATOR, page_allowed, role_of
from tokenplane.console.guard import client_host, same_origin, secure
from tokenplane.console.i18n import LANGUAGES, Translator, load_catalogs, pick_language
from tokenplane.console.oidc import FLOW_COOKIE, FLOW_TTL_S, OidcClient, SignInError, identity
from tokenplane.console.page import Data, Page, PageError
from tokenplane.console.pages import (
    advice,
    audit,
    budgets,
    chain,
    cluster,
    overview,
    sessions,
    slos,
    tools,
    usage,
    versions,
)
from tokenplane.console.parts import ConsoleParts
from tokenplane.console.session import COOKIE, LANG_COOKIE, Session, SessionCodec, console_secret
from tokenplane.meta.directory import Directory

PREFIX = "/console"
LOGIN_COOKIE = "tp_login"
Builder = Callable[[Page], Awaitable[Data]]
# the pages in the menu's order: (name, builder, admin keys only)
log = logging.getLogger("tokenplane.console")
SSO_KEY_PREFIX = "oidc:"  # the name of a key made for a single sign-on
PAGES: tuple[tuple[str, Builder, bool], ...] = (
    ("overview", overview.build, False),
    ("usage", usage.build, False),
    ("budgets", budgets.build, False),
    ("slos", slos.build, False),
    ("cluster", cluster.build, True),
    ("sessions", sessions.build, False),
    ("tools", tools.build, False),
    ("audit", audit.build, False),
    ("versions", versions.build, False),
    ("advice", advice.build, False),
)
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".md": "text/plain"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; frame-ancestors 'none'; "
                               "form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _fmt(value: Any) -> str:
    """Numbers with thousands separators (ints) or as given."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") if value % 1 else f"{value:,.0f}"
    return str(value)


def console_path(target: str) -> bool:
    """Whether ``target`` is a path of the console: under ``/console``, relative to
    this host (no scheme, no host, no ``//`` or ``\\`` a browser reads as one), with no
    control character (a CR/LF would end the ``Location`` header)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in target) or "\\" in target:
        return False
    parts = urlsplit(target)
    return (not parts.scheme and not parts.netloc and not target.startswith("//")
            and (parts.path == PREFIX or parts.path.startswith(PREFIX + "/")))


def redirect(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location, **SECURITY_HEADERS})


def _json_attr(value: Any) -> str:
    return orjson.dumps(value).decode()


class ConsoleRoutes:
    def __init__(self, parts: ConsoleParts, clock: Callable[[], float] = time.time) -> None:
        self.parts = parts
        self.clock = clock
        cfg = parts.config
        secret = console_secret(parts.home, cfg.secret_env)
        self.codec = SessionCodec(secret, cfg.session_ttl_s)
        self.oidc = OidcClient(cfg.oidc, secret) if cfg.oidc is not None else None
        self._dir: Directory | None = None  # opened on the first single sign-on
        self.catalogs = load_catalogs()
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("tokenplane.console", "templates"),
            autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
            lstrip_blocks=True)
        self.env.filters["n"] = _fmt
        self.env.filters["json"] = _json_attr

    def install(self, app: web.Application) -> None:
        r = app.router
        r.add_get(PREFIX, self.home)
        r.add_get(PREFIX + "/", self.home)
        r.add_get(PREFIX + "/login", self.login_form)
        r.add_post(PREFIX + "/login", self.login)
        r.add_post(PREFIX + "/logout", self.logout)
        r.add_get(PREFIX + "/oidc/login", self.oidc_login)
        r.add_get(PREFIX + "/oidc/callback", self.oidc_callback)
        r.add_get(PREFIX + "/lang", self.switch_language)
        r.add_get(PREFIX + "/usage.csv", self.usage_csv)
        r.add_post(PREFIX + "/audit/verify", self.verify_audit)
        r.add_get(PREFIX + "/static/{name}", self.static)
        for name, builder, _ in PAGES:
            r.add_get(f"{PREFIX}/{name}", self._page_handler(name, builder))

    # --- rendering ------------------------------------------------------------------
    def _lang(self, request: web.Request) -> str:
        return pick_language(request.cookies.get(LANG_COOKIE),
                             request.headers.get("accept-language"), self.parts.config.language)

    def _render(self, request: web.Request, template: str, status: int = 200,
                **values: Any) -> web.Response:
        lang = self._lang(request)
        html = self.env.get_template(template).render(
            t=Translator(self.catalogs, lang), lang=lang, languages=LANGUAGES,
            path=request.path_qs, **values)
        resp = web.Response(text=html, status=status, content_type="text/html")
        resp.headers.update(SECURITY_HEADERS)
        return resp

    def _cookie(self, request: web.Request, resp: web.StreamResponse, name: str,
                value: str, max_age: int | None) -> None:
        resp.set_cookie(name, value, max_age=max_age, path=PREFIX, httponly=True,
                        samesite="Strict", secure=secure(request, self.parts.config))

    # --- sessions -------------------------------------------------------------------
    def _signed_in(self, request: web.Request) -> tuple[Principal, Session] | None:
        session = self.codec.read(request.cookies.get(COOKIE))
        if session is None:
            return None
        principal = self.parts.keys.authenticate(session.key)  # revoked: None
        if principal is None or self.parts.keys.session_ended(session.sid):
            return None  # the key revoked, or this session signed out
        return principal, session

    def _to_login(self, request: web.Request) -> web.Response:
        return redirect(f"{PREFIX}/login")

    def _first_page(self, principal: Principal) -> str:
        """Where a signed-in key lands: its first page (auth/roles.py CONSOLE_RULES)."""
        role = role_of(principal.admin, principal.role)
        return next((f"{PREFIX}/{n}" for n, _, _ in PAGES if page_allowed(role, n)),
                    f"{PREFIX}/login")

    async def home(self, request: web.Request) -> web.Response:
        found = self._signed_in(request)
        return redirect(self._first_page(found[0]) if found else f"{PREFIX}/login")

    async def login_form(self, request: web.Request, error: str | None = None,
                         status: int = 200) -> web.Response:
        found = self._signed_in(request) if error is None else None
        if found is not None:
            return redirect(self._first_page(found[0]))
        token = secrets.token_urlsafe(24)
        resp = self._render(request, "login.html", status, csrf=token, error=error,
                            nav=None, sso=self.oidc is not None)
        self._cookie(request, resp, LOGIN_COOKIE, token, 3600)
        return resp

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = str(form.get("csrf", ""))
        expected = request.cookies.get(LOGIN_COOKIE, "")
        if not (same_origin(request) and expected and hmac.compare_digest(token, expected)):
            return self._forbidden(request)
        key = str(form.get("key", "")).strip()
        principal = self.parts.keys.authenticate(key) if key else None
        if principal is None:
            return await self.login_form(request, "login.bad_key", 401)
        landing = self._first_page(principal)
        if landing == f"{PREFIX}/login":  # an inference-only key: no page at all
            return await self.login_form(request, "login.no_pages", 403)
        cookie, _ = self.codec.issue(key)
        resp = redirect(landing)
        self._cookie(request, resp, COOKIE, cookie, self.parts.config.session_ttl_s)
        return resp

    async def logout(self, request: web.Request) -> web.Response:
        found = self._signed_in(request)
        if found is not None and not await self._csrf_ok(request, found[1]):
            return self._forbidden(request)
        if found is not None:  # ended for every copy of the cookie, on every replica
            self.parts.keys.end_session(found[1].sid,
                                        time.time() + self.parts.config.session_ttl_s)
            principal = self.parts.keys.authenticate(found[1].key)
            rec = self.parts.keys.get(principal.key_id) if principal is not None else None
            if rec is not None and (rec.name or "").startswith(SSO_KEY_PREFIX):
                self.parts.keys.revoke(rec.id)  # a single sign-on's key ends with it
        resp = redirect(f"{PREFIX}/login")
        resp.del_cookie(COOKIE, path=PREFIX)
        return resp

    # --- single sign-on (console/oidc.py) ---------------------------------------------
    def _redirect_uri(self, request: web.Request) -> str:
        assert self.parts.config.oidc is not None
        if self.parts.config.oidc.redirect_uri:
            return self.parts.config.oidc.redirect_uri
        scheme = "https" if secure(request, self.parts.config) else "http"
        return f"{scheme}://{client_host(request)}{PREFIX}/oidc/callback"

    async def oidc_login(self, request: web.Request) -> web.Response:
        if self.oidc is None:
            raise web.HTTPNotFound()
        try:
            url, cookie = await self.oidc.start(self._redirect_uri(request))
        except SignInError as err:
            return await self._sso_failed(request, err)
        resp = web.Response(status=303, headers={"Location": url, **SECURITY_HEADERS})
        # Lax: the provider's redirect back is a cross-site navigation
        resp.set_cookie(FLOW_COOKIE, cookie, max_age=FLOW_TTL_S, path=PREFIX, httponly=True,
                        samesite="Lax", secure=secure(request, self.parts.config))
        return resp

    async def oidc_callback(self, request: web.Request) -> web.Response:
        if self.oidc is None or self.parts.config.oidc is None:
            raise web.HTTPNotFound()
        cfg = self.parts.config.oidc
        try:
            flow = self.oidc.flow(request.cookies.get(FLOW_COOKIE))
            state, code = request.query.get("state", ""), request.query.get("code", "")
            if request.query.get("error"):
                raise SignInError(403, f"the provider said {request.query['error']}")
            if flow is None or not code or not hmac.compare_digest(state, flow.state):
                raise SignInError(400, "this sign-in is not the one this browser started")
            who = identity(await self.oidc.finish(flow, code), cfg)
            if who.role != OPERATOR and not self.directory_has(who.tenant):
                raise SignInError(403, f"no tenant '{who.tenant}' here")
        except SignInError as err:
            return await self._sso_failed(request, err)
        key, _ = self.parts.keys.create_key(
            who.tenant, who.department, None, f"{SSO_KEY_PREFIX}{who.subject}"[:200],
            role=who.role, expires_at=self.clock() + self.parts.config.session_ttl_s)
        cookie, _ = self.codec.issue(key)
        principal = self.parts.keys.authenticate(key)
        landing = self._first_page(principal) if principal is not None else PREFIX
        # a page, not a redirect: the browser then comes back same-site, and sends
        # the Strict session cookie (a redirect would continue the cross-site chain)
        resp = self._render(request, "signed_in.html", nav=None, landing=landing)
        # one Set-Cookie per answer: the front's relay joins repeated headers (the flow
        # cookie expires by itself; its code cannot be exchanged twice)
        self._cookie(request, resp, COOKIE, cookie, self.parts.config.session_ttl_s)
        return resp

    def directory_has(self, tenant: str) -> bool:
        return any(t["name"] == tenant for t in self._directory().tenants())

    def _directory(self) -> Directory:
        from tokenplane.meta.open_stores import open_directory

        if self._dir is None:
            self._dir = open_directory(self.parts.keys)
        return self._dir

    async def _sso_failed(self, request: web.Request, err: SignInError) -> web.Response:
        log.warning("console single sign-on failed: %s", err)
        return await self.login_form(request, "login.sso_failed", err.status)

    async def _csrf_ok(self, request: web.Request, session: Session) -> bool:
        form = await request.post()
        token = str(form.get("csrf", ""))
        return same_origin(request) and hmac.compare_digest(token, session.csrf)

    def _forbidden(self, request: web.Request) -> web.Response:
        return self._render(request, "error.html", 403, nav=None,
                            message="error.csrf")

    async def switch_language(self, request: web.Request) -> web.Response:
        lang = request.query.get("to", "")
        back = request.query.get("next") or f"{PREFIX}/overview"
        if not console_path(back):  # never off the console, never a header's end
            return self._render(request, "error.html", 400, nav=None,
                                message="error.bad_next")
        resp = redirect(back)
        if lang in LANGUAGES:
            self._cookie(request, resp, LANG_COOKIE, lang, 365 * 86400)
        return resp

    # --- pages ----------------------------------------------------------------------
    def _page_handler(self, name: str, builder: Builder) -> Callable[
            [web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            found = self._signed_in(request)
            if found is None:
                return self._to_login(request)
            principal, session = found
            nav = self._nav(principal, name, session)
            if not page_allowed(role_of(principal.admin, principal.role), name):
                return self._render(request, "error.html", 403, nav=nav,
                                    message="error.role")
            page = Page(request, principal, session.key, self.parts, self.clock())
            try:
                data = await builder(page)
            except PageError as err:
                return self._render(request, "error.html", err.status, nav=nav,
                                    message=err.message_key)
            return self._render(request, f"{name}.html", nav=nav, data=data)

        return handler

    def _nav(self, principal: Principal, current: str, session: Session) -> dict[str, Any]:
        role = role_of(principal.admin, principal.role)
        return {"pages": [n for n, _, _ in PAGES if page_allowed(role, n)],
                "current": current, "csrf": session.csrf,
                "who": "admin" if principal.admin else principal.tenant,
                "key_id": principal.key_id}

    async def verify_audit(self, request: web.Request) -> web.Response:
        """The Audit page with the chain's status (a POST: it reads the whole log)."""
        found = self._signed_in(request)
        if found is None:
            return self._to_login(request)
        principal, session = found
        nav = self._nav(principal, "audit", session)
        if not page_allowed(role_of(principal.admin, principal.role), "audit"):
            return self._render(request, "error.html", 403, nav=nav, message="error.role")
        page = Page(request, principal, session.key, self.parts, self.clock())
        try:
            data = await audit.build(page)  # before the body is read: it clones the request
            if not await self._csrf_ok(request, session):
                return self._forbidden(request)
            status = await chain.chain_status(page)
        except PageError as err:
            return self._render(request, "error.html", err.status, nav=nav,
                                message=err.message_key)
        return self._render(request, "audit.html", nav=nav, data={**data, "chain": status,
                                                                    "verified": True})

    async def usage_csv(self, request: web.Request) -> web.Response:
        found = self._signed_in(request)
        if found is None:
            return self._to_login(request)
        principal, session = found
        if not page_allowed(role_of(principal.admin, principal.role), "usage"):
            return self._render(request, "error.html", 403,
                                nav=self._nav(principal, "usage", session),
                                message="error.role")
        page = Page(request, principal, session.key, self.parts, self.clock())
        try:
            data = await usage.build(page)
        except PageError as err:
            return self._render(request, "error.html", err.status,
                                nav=self._nav(principal, "usage", session),
                                message=err.message_key)
        resp = web.Response(text=usage.csv_text(data), content_type="text/csv")
        resp.headers["Content-Disposition"] = 'attachment; filename="usage.csv"'
        resp.headers.update(SECURITY_HEADERS)
        return resp

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
            raise web.HTTPNotFound()
        item = resources.files("tokenplane.console") / "static" / name
        if not item.is_file():
            raise web.HTTPNotFound()
        resp = web.Response(body=item.read_bytes(), content_type=STATIC_TYPES[suffix])
        resp.headers["Cache-Control"] = "public, max-age=3600"
        resp.headers["X-Content-Type-Options"] = "nosniff"
        return resp
