"""Cross-origin resource sharing (``server.cors``): which browser origins may call the
gateway, answered the same way by both servers of ``tokenplane serve``.

The HTTP/1.1 front (``api/front/server.py``) answers the preflights of the inference
routes and adds the headers to their answers (whole, streamed, errors); the aiohttp
application answers every other route's preflight in :func:`cors_middleware` and
adds the headers to every answer it prepares (:func:`add_cors_headers`, on
``on_response_prepare``, so streams and error envelopes get them too). With
``server.cors`` absent neither is installed: the front checks one ``None``.

A preflight is an ``OPTIONS`` request carrying ``Origin`` and
``Access-Control-Request-Method``. From an allowed origin, for an allowed method and
headers, it is answered 204 with ``Access-Control-Allow-Origin`` (the origin itself),
``-Methods``, ``-Headers``, ``-Max-Age`` (and ``-Credentials``); otherwise 403 in the
error envelope, with no ``Access-Control-Allow-*`` header, so the browser refuses. An
actual request from an allowed origin gets ``Access-Control-Allow-Origin``,
``Access-Control-Expose-Headers`` (and ``-Credentials``); any request that names an
origin gets ``Vary: Origin``, since the answer's headers depend on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from tokenplane.config.schema import CorsConfig
from tokenplane.errors import GatewayError

ALLOW_ORIGIN = "access-control-allow-origin"
_VARY = {"vary": "Origin"}


def is_preflight(method: str, headers: Mapping[str, str]) -> bool:
    return method == "OPTIONS" and "access-control-request-method" in headers \
        and "origin" in headers


class Cors:
    """The allow-list, with the answer headers built once."""

    __slots__ = ("_actual", "_any", "_any_headers", "_headers", "_methods", "_origins",
                 "_preflight")

    def __init__(self, cfg: CorsConfig) -> None:
        self._any = "*" in cfg.allow_origins
        self._origins = frozenset(o for o in cfg.allow_origins if o != "*")
        self._methods = frozenset(cfg.allow_methods)
        self._any_headers = "*" in cfg.allow_headers
        self._headers = frozenset(h for h in cfg.allow_headers if h != "*")
        credentials = {"access-control-allow-credentials": "true"} \
            if cfg.allow_credentials else {}
        actual: dict[str, str] = {**_VARY, **credentials}
        if cfg.expose_headers:
            actual["access-control-expose-headers"] = ", ".join(cfg.expose_headers)
        self._actual = actual
        self._preflight = {**_VARY, **credentials,
                           "access-control-allow-methods": ", ".join(cfg.allow_methods),
                           "access-control-max-age": str(cfg.max_age_s)}

    def allowed(self, origin: str) -> bool:
        return self._any or origin.lower() in self._origins

    def actual(self, headers: Mapping[str, str]) -> dict[str, str] | None:
        """The headers an answer to a request with ``headers`` gets (None: no
        ``Origin``, nothing to add)."""
        origin = headers.get("origin")
        if origin is None:
            return None
        if not self.allowed(origin):
            return dict(_VARY)
        return {**self._actual, ALLOW_ORIGIN: origin}

    def preflight(self, headers: Mapping[str, str]) -> tuple[int, dict[str, str]]:
        """The status and headers of the answer to a preflight (raises the 403)."""
        origin = headers.get("origin", "")
        if not self.allowed(origin):
            raise refused(f"The origin {origin!r} is not allowed to call this server.")
        method = headers.get("access-control-request-method", "").strip()
        if method.upper() not in self._methods:
            raise refused(f"The method {method!r} is not allowed from {origin!r}.")
        asked = headers.get("access-control-request-headers", "")
        names = [h.strip().lower() for h in asked.split(",") if h.strip()]
        if not self._any_headers:
            extra = [h for h in names if h not in self._headers]
            if extra:
                raise refused(f"The headers {', '.join(extra)} are not allowed from "
                              f"{origin!r}.")
        out = {**self._preflight, ALLOW_ORIGIN: origin}
        if names:
            out["access-control-allow-headers"] = ", ".join(names)
        return 204, out


def refused(message: str) -> GatewayError:
    return GatewayError(403, message, code="cors_not_allowed", headers=dict(_VARY))


CORS: web.AppKey[Cors | None] = web.AppKey("cors")  # None: server.cors is off


def cors_middleware(cors: Cors) -> Any:
    """Answers preflights (any path) before routing can say 404 or 405; inside the
    envelope middleware, whose 403 answer it raises."""

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if is_preflight(request.method, request.headers):
            status, headers = cors.preflight(request.headers)
            return web.Response(status=status, headers=headers)
        resp: web.StreamResponse = await handler(request)
        return resp

    return middleware


def add_cors_headers(cors: Cors) -> Any:
    """An ``on_response_prepare`` hook: the actual answer's CORS headers, set before
    its head is written (whole answers, streams and error envelopes alike)."""

    async def hook(request: web.Request, response: web.StreamResponse) -> None:
        if is_preflight(request.method, request.headers):
            return  # answered by the middleware, allowed or not
        extra = cors.actual(request.headers)
        if extra:
            for name, value in extra.items():
                if name == "vary" and "vary" in response.headers:
                    if "origin" not in response.headers["vary"].lower():
                        response.headers["vary"] += ", Origin"
                    continue
                response.headers[name] = value

    return hook
