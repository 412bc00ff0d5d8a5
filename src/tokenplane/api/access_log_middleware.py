"""The access log for the routes the aiohttp application serves (``/v1/models``,
``/metrics``, ``/health``, ``/admin/...``, unknown paths): time, request id, method,
path, status, duration. The inference routes are logged by the pipeline's finisher
(``pipeline/access_log_stage.py``), with the principal, model and tokens."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import orjson
from aiohttp import web

from tokenplane.observe.access_log import AccessLog

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def access_log_middleware(log: AccessLog, pipeline_paths: Collection[str]) -> Any:
    """Outermost middleware: one line per request, after the envelope middleware has
    made its answer (errors included)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "POST" and request.path in pipeline_paths:
            return await handler(request)  # the pipeline's finisher logs these
        start = time.time()
        status = 500
        rid = None
        try:
            resp = await handler(request)
            status, rid = resp.status, resp.headers.get("x-request-id")
            return resp
        finally:
            if log.wants(status < 400):
                log.add(orjson.dumps({
                    "time": log.stamp(start),
                    "request_id": rid, "method": request.method, "path": request.path,
                    "status": status, "duration_ms": round((time.time() - start) * 1000, 1),
                }, option=orjson.OPT_APPEND_NEWLINE))

    return middleware
