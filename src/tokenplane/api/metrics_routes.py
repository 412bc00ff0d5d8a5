"""``GET /metrics``: where it is served, who may read it, and the whole gateway's view.

The metrics name every tenant's traffic and cost, so they are not public:

- the metrics listener (``observe.metrics.listen``, ``127.0.0.1:9464`` by default) serves
  them to whoever reaches it (loopback: the host), or only to the bearer token of
  ``observe.metrics.token_env`` (or an admin key) when one is configured;
- on the gateway's public port ``/metrics`` answers only that token or an admin key:
  401 without a valid credential, 403 for a key without the admin scope, in the
  OpenAI error envelope.

With ``serve --workers N`` whichever worker a scrape reaches answers for all of them
(``observe/peers.py`` fetches the siblings' series, ``observe/merge.py`` sums them).
"""

from __future__ import annotations

import hmac
import logging
import os

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from tokenplane.api.openai_routes import RequestIds, envelope_middleware
from tokenplane.config.schema import MetricsConfig
from tokenplane.errors import GatewayError
from tokenplane.meta.keystore import KeyStore
from tokenplane.observe.merge import (
    Family,
    Fixed,
    add_counts,
    counts_only,
    decode,
    encode,
    merge,
    snapshot,
    workers_gauge,
)
from tokenplane.observe.metrics import CONTENT_TYPE, GatewayMetrics
from tokenplane.observe.peers import MetricsPeers, read_last

log = logging.getLogger("tokenplane.api")


def metrics_token(cfg: MetricsConfig) -> str | None:
    """The bearer token ``observe.metrics.token_env`` names (None: no token); ValueError
    naming the path when the variable is unset or empty."""
    if cfg.token_env is None:
        return None
    token = os.environ.get(cfg.token_env, "").strip()
    if not token:
        raise ValueError(f"observe.metrics.token_env: ${cfg.token_env} is not set")
    return token


class MetricsView:
    """This process's metrics, or with ``peers`` the sum over every worker."""

    def __init__(self, metrics: GatewayMetrics, writer_id: str,
                 peers: MetricsPeers | None = None) -> None:
        self.metrics = metrics
        self.writer_id = writer_id
        self.peers = peers
        self._carried: list[Family] | None = None

    def _own(self) -> list[Family]:
        """This worker's families (plus the counts of the dead worker it replaced), kept
        for a replacement of its own before they are answered."""
        families = snapshot(self.metrics.registry)
        if self.peers is None:
            return families
        if self._carried is None:
            inherited = self.peers.inherited
            self._carried = counts_only(_decoded(self.writer_id, inherited) or [])
        if self._carried:
            families = add_counts(families, self._carried)
        self.peers.save_last(encode(families))
        return families

    def local(self) -> bytes:
        """This worker's families, encoded for a sibling."""
        return encode(self._own())

    async def render(self) -> bytes:
        if self.peers is None:
            return self.metrics.render()
        parts = [(self.writer_id, self._own())]
        answered = 1
        for writer_id, data in await self.peers.fetch():
            families = _decoded(writer_id, data)
            if families is not None:
                answered += 1
            else:  # dead or restarting: its counts as last answered, so no sum goes down
                families = counts_only(
                    _decoded(writer_id, read_last(self.peers.run_dir, writer_id)) or [])
            parts.append((writer_id, families))
        merged = merge(parts)
        merged.append(workers_gauge(answered, self.peers.workers))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Fixed(merged))
        text: bytes = generate_latest(registry)
        return text


def _decoded(writer_id: str, data: bytes | None) -> list[Family] | None:
    if data is None:
        return None
    try:
        return decode(data)
    except (orjson.JSONDecodeError, ValueError, TypeError):
        log.warning("metrics of worker %s unreadable; left out of this scrape", writer_id)
        return None


class MetricsAccess:
    """Who may read ``/metrics``: the configured bearer ``token`` or an admin key."""

    def __init__(self, keys: KeyStore, token: str | None) -> None:
        self.keys = keys
        self.token = token

    def check(self, request: web.Request) -> None:
        auth = request.headers.get("authorization") or ""
        scheme, _, credential = auth.partition(" ")
        credential = credential.strip() if scheme.lower() == "bearer" else ""
        if self.token is not None and credential and hmac.compare_digest(
                credential.encode(), self.token.encode()):
            return
        principal = self.keys.authenticate(credential) if credential else None
        if principal is None:
            raise GatewayError(401, "GET /metrics needs the metrics bearer token or an admin "
                               "API key (or scrape the metrics listener, "
                               "observe.metrics.listen).", code="invalid_api_key",
                               headers={"www-authenticate": "Bearer"})
        if not principal.admin:
            raise GatewayError(403, "GET /metrics needs an API key with the admin scope.",
                               code="admin_required")


class MetricsRoutes:
    """``/metrics`` on the gateway's port (``public``) and on the metrics listener."""

    def __init__(self, view: MetricsView, access: MetricsAccess) -> None:
        self.view = view
        self.access = access

    def install(self, app: web.Application) -> None:
        app.router.add_get("/metrics", self.public)

    async def public(self, request: web.Request) -> web.Response:
        self.access.check(request)
        return await self._answer()

    async def listener(self, request: web.Request) -> web.Response:
        if self.access.token is not None:
            self.access.check(request)
        return await self._answer()

    async def _answer(self) -> web.Response:
        return web.Response(body=await self.view.render(), headers={"content-type": CONTENT_TYPE})


class MetricsListener:
    """The metrics listener: ``/metrics`` (and ``/health``) on host:port of its own."""

    def __init__(self, routes: MetricsRoutes, host: str, port: int, *, reuse_port: bool,
                 new_id: RequestIds) -> None:
        self.routes = routes
        self.host = host
        self._port = port
        self.reuse_port = reuse_port
        self.new_id = new_id
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        if self._runner is not None and self._runner.addresses:
            return int(self._runner.addresses[0][1])
        return self._port

    async def start(self) -> None:
        app = web.Application(middlewares=[envelope_middleware(self.new_id)])
        app.router.add_get("/metrics", self.routes.listener)
        app.router.add_get("/health", _health)
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._port, reuse_port=self.reuse_port or None)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise OSError(exc.errno, f"the metrics listener (observe.metrics.listen) cannot "
                          f"bind {self.host}:{self._port}: {exc.strerror}; choose another "
                          f"port, or null for none") from exc
        self._runner = runner

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def _health(_: web.Request) -> web.Response:
    return web.Response(body=b'{"status":"ok"}', content_type="application/json")
