"""``GET /admin/v1/advice?since=30d&until=&tenant=T``: the optimisation advisor's
findings (docs/ADVICE.md), the same document as ``tokenplane advise --format json``.
An admin key sees every tenant (``tenant=`` narrows); a tenant's key sees only its own
(naming another is a 403). Read from the advice rollups, off the inference path.

Each worker keeps the documents it was asked for and refreshes them behind the answer
(``advice/gateway/documents.py``: stale-while-revalidate, one computation at a time);
the admin's default document (every tenant, the last 30 days) is computed at start and
every five minutes, so no view of it waits; it is saved in the data directory
(``advice/default.json``), so a restarted gateway answers with it while it computes the
next. Windows are kept as asked: ``30d`` is the last 30 days whenever the document was
made. The answer adds ``age_s`` (seconds since
``generated_at``) and ``refreshing`` (a newer document is being computed). A request
with ``Cache-Control: no-cache`` (or ``max-age=0``) waits for a document computed
after it arrived; with ``wait=false`` a request for a document not computed yet is
answered within ``GRACE_S`` (0.2 s; one tenant's document is computed by then), if
need be with a 202 ``{"object": "advice.pending", "computing_s"}`` (the computation
goes on; the console's page says so and reloads itself). The computations read
through a connection of their own (``advice/gateway/reader.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from aiohttp import web

from tokenplane.advice.gateway.documents import AdviceDocuments, Key
from tokenplane.advice.gateway.reader import AdviceReader
from tokenplane.advice.gateway.source import gather_advice
from tokenplane.api.admin_usage import authenticate, scope_tenant
from tokenplane.errors import invalid
from tokenplane.meta.keystore import KeyStore
from tokenplane.metering.reports import parse_time_bound
from tokenplane.metering.stores.base import LedgerSink

PATH = "/admin/v1/advice"
DEFAULT_SINCE = "30d"  # the window without since / until (and the console's default)
PINNED: Key = (None, DEFAULT_SINCE, "")  # every tenant's default document, kept fresh
GRACE_S = 0.2  # wait=false: how long a computation is waited for before a 202


class AdminAdviceRoutes:
    def __init__(self, keys: KeyStore, sink: Callable[[], LedgerSink],
                 clock: Callable[[], float] = time.time, *, fresh_s: float = 60.0,
                 keep: bool = True, saved: Path | None = None,
                 grace_s: float = GRACE_S, audit: Path | None = None) -> None:
        self.keys = keys
        self.audit = audit  # the audit log's root: the MCP tools' findings
        self.grace_s = grace_s
        self.reader = AdviceReader(sink)  # off the sink's own thread (SQLite)
        self.clock = clock
        self.documents = AdviceDocuments(self._compute, clock=clock, fresh_s=fresh_s,
                                         pinned=PINNED if keep else None, saved=saved)

    def install(self, app: web.Application) -> None:
        app.router.add_get(PATH, self.advice)

    async def start(self) -> None:
        """Compute the default document now and keep it fresh (after the ledger opened);
        until then, views get the one saved before the restart (if under an hour old)."""
        await self.documents.start()

    async def close(self) -> None:
        await self.documents.close()
        await self.reader.close()

    def _bound(self, raw: str, name: str, now: float) -> float | None:
        if raw == "":
            return None
        try:
            return parse_time_bound(raw, now)
        except ValueError as exc:
            raise invalid(str(exc), param=name) from None

    def _key(self, request: web.Request) -> Key:
        """The document asked for, its bounds checked (400s) before anything is read."""
        principal = authenticate(self.keys, request)
        tenant = scope_tenant(principal, request.query.get("tenant"))
        since, until = request.query.get("since", ""), request.query.get("until", "")
        now = self.clock()
        lo, hi = self._bound(since, "since", now), self._bound(until, "until", now)
        if lo is not None and hi is not None and lo >= hi:
            raise invalid("'since' must be before 'until'", param="since")
        if since == "" and until == "":
            since = DEFAULT_SINCE  # the same window as asked with since=30d
        return tenant, since.strip(), until.strip()

    async def _compute(self, key: Key) -> tuple[float, bytes]:
        tenant, since, until = key
        now = self.clock()
        doc = await gather_advice(await self.reader.get(), since=self._bound(since, "since", now),
                                  until=self._bound(until, "until", now), tenant=tenant,
                                  now=now, audit=self.audit)
        return now, await asyncio.to_thread(orjson.dumps, doc)

    async def advice(self, request: web.Request) -> web.Response:
        key = self._key(request)
        wait = request.query.get("wait", "true")
        if wait not in ("true", "false"):
            raise invalid("'wait' must be true or false", param="wait")
        directives = {d.strip().lower() for d in
                      request.headers.get("Cache-Control", "").split(",")}
        fresh = "no-cache" in directives or "max-age=0" in directives
        if wait == "false" and not fresh:
            started = self.documents.pending(key)
            if started is not None:  # nothing kept yet: a short wait (one tenant's), then
                done, _ = await asyncio.wait({self.documents.refresh(key)},
                                             timeout=self.grace_s)
                if not done:  # say so, do not wait longer
                    return web.json_response(
                        {"object": "advice.pending", "computing_s": round(
                            max(0.0, self.clock() - started), 1)}, status=202)
        served = await self.documents.get(key, made_after=self.clock() if fresh else None)
        head = orjson.dumps({"age_s": round(max(0.0, self.clock() - served.made_at), 1),
                             "refreshing": served.refreshing})
        # the kept JSON object with the two fields first (no re-encoding of the findings)
        body = head[:-1] + b"," + served.body[1:]
        return web.Response(body=body, content_type="application/json")
