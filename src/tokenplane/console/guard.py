"""The console's request checks: the origin of a POST, the cookie's Secure flag."""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import web

from tokenplane.api.front.relay import HOST_HEADER
from tokenplane.config.console_schema import ConsoleConfig


def client_host(request: web.Request) -> str:
    """The host the browser addressed: a proxy's ``X-Forwarded-Host``, else the one the
    front relayed, else the request's own."""
    return (request.headers.get("x-forwarded-host") or request.headers.get(HOST_HEADER)
            or request.host).split(",")[0].strip().lower()


def same_origin(request: web.Request) -> bool:
    """A POST must come from a page of this host: its ``Origin`` (or, without one, its
    ``Referer``) names the host the browser addressed."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return False
    return urlsplit(source).netloc.lower() == client_host(request)


def secure(request: web.Request, cfg: ConsoleConfig) -> bool:
    if cfg.secure_cookie != "auto":
        return cfg.secure_cookie == "always"
    proto = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.secure or proto == "https"
