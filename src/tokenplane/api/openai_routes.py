"""The gateway's HTTP face (aiohttp): OpenAI routes, errors in OpenAI's envelope.

The handlers are thin: build the request context, run the pipeline, write the reply.
Every response carries ``x-request-id``. No client mistake yields a 500 or a trace.
:meth:`OpenAIRoutes.run` and the header builders below are shared with the fast
HTTP/1.1 front (``api/front_*.py``), which serves the inference routes in ``serve``.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from aiohttp import web

from tokenplane import __version__
from tokenplane.api.key_auth import key_principal
from tokenplane.api.openapi import openapi_document
from tokenplane.auth.principal import Principal
from tokenplane.dialects.base import OPENAI, AnswerInfo, Dialect
from tokenplane.errors import GatewayError
from tokenplane.meta.keystore import KeyStore
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.operations.registry import OperationRegistry, standard_operations
from tokenplane.operations.validate import not_found
from tokenplane.pipeline.context import ClientLink, RequestContext
from tokenplane.pipeline.runner import Pipeline, Reply

log = logging.getLogger("tokenplane.api")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
JSON = "application/json"
REQUEST_ID: web.RequestKey[str] = web.RequestKey("request_id", str)


class RequestIds:
    """Unique request ids without a syscall per request: a random per-process prefix
    and a counter (``req_<12 hex>_<counter hex>``)."""

    def __init__(self) -> None:
        self._prefix = "req_" + os.urandom(6).hex()
        self._n = itertools.count(1)

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._n):012x}"


def error_response(err: GatewayError, request_id: str, dialect: Dialect = OPENAI
                   ) -> web.Response:
    """``err`` in the envelope of the dialect the client speaks."""
    status, headers, body = error_parts(err, request_id, dialect)
    return web.Response(status=status, body=body, headers=headers)


def error_parts(err: GatewayError, request_id: str, dialect: Dialect = OPENAI
                ) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of ``err`` in ``dialect``'s envelope."""
    headers = {**dialect.error_headers(request_id), **err.headers, "content-type": JSON}
    return dialect.error_status(err.status), headers, dialect.error_body(err, request_id)


def error_headers(err: GatewayError, request_id: str) -> dict[str, str]:
    """The headers of an OpenAI error answer, for writers other than aiohttp."""
    return {"x-request-id": request_id, **err.headers, "content-type": JSON}


def reply_headers(reply: Reply, request_id: str) -> dict[str, str]:
    """The headers of a whole (non-stream) answer."""
    headers = {"x-request-id": request_id, **reply.headers}
    headers.setdefault("content-type", JSON)
    return headers


def stream_headers(reply: Reply, request_id: str) -> dict[str, str]:
    """The headers of a streamed (SSE) answer."""
    return {**reply.headers, "content-type": "text/event-stream", "cache-control": "no-cache",
            "x-request-id": request_id}


def too_large(length: int | None = None, limit: int = 0) -> GatewayError:
    """413: with the announced ``Content-Length`` and the limit when known."""
    if length is None:
        return GatewayError(413, "The request body is too large.", code="request_too_large")
    return GatewayError(413, f"The request body is too large: {length} bytes; the limit is "
                        f"{limit}.", code="request_too_large")


def not_allowed(method: str, path: str) -> GatewayError:
    return GatewayError(405, f"Method {method} is not allowed on {path}.",
                        code="method_not_allowed")


def internal_error() -> GatewayError:
    return GatewayError(500, "The server had an error processing your request.",
                        code="internal_error")


def envelope_middleware(new_id: Callable[[], str],
                        dialect_for: Callable[[str], Dialect] | None = None) -> Any:
    """Gives every request an id and turns every failure into the envelope of the
    dialect spoken at its path (OpenAI's unless ``dialect_for`` says otherwise)."""
    pick = dialect_for or (lambda path: OPENAI)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        rid = new_id()
        request[REQUEST_ID] = rid
        return await _enveloped(request, handler, rid, pick(request.path))

    return middleware


async def _enveloped(request: web.Request, handler: Handler, rid: str, dialect: Dialect
                     ) -> web.StreamResponse:
    try:
        resp = await handler(request)
    except GatewayError as err:
        return error_response(err, rid, dialect)
    except web.HTTPException as exc:
        if exc.status == 404:
            return error_response(not_found(request.path), rid, dialect)
        if exc.status == 405:
            return error_response(not_allowed(request.method, request.path), rid, dialect)
        if exc.status == 413:
            return error_response(too_large(), rid, dialect)
        if exc.status < 400:
            raise
        return error_response(GatewayError(exc.status, exc.reason, code="http_error"), rid,
                              dialect)
    except Exception:
        log.exception("internal error on %s %s (%s)", request.method, request.path, rid)
        return error_response(internal_error(), rid, dialect)
    if not resp.prepared:
        resp.headers.update(dialect.error_headers(rid))  # x-request-id (and request-id)
    return resp


def answer_info(ctx: RequestContext) -> AnswerInfo:
    """What the request's dialect needs to render its answer."""
    model = ctx.requested_model or ctx.alias or ""
    return AnswerInfo(model, ctx.request_id, ctx.counts.prompt)


def rendered(reply: Reply, dialect: Dialect, info: AnswerInfo) -> Reply:
    """The canonical reply in ``dialect``'s wire format."""
    headers = {**reply.headers, **dialect.error_headers(info.request_id)}
    if reply.stream is None:
        return Reply(reply.status, headers, body=dialect.answer(reply.body or b"", info))
    return Reply(reply.status, headers, stream=reply.stream, abandon=reply.abandon,
                 render=dialect.renderer(info))


def model_card(alias: str) -> dict[str, Any]:
    return {"id": alias, "object": "model", "created": 0, "owned_by": "tokenplane"}


class OpenAIRoutes:
    def __init__(
        self,
        pipeline: Pipeline,
        keys: KeyStore,
        metrics: GatewayMetrics,
        models_for: Callable[[str], list[str]],
        max_body: int,
        new_id: Callable[[], str] | None = None,
        operations: OperationRegistry | None = None,
        stream_stall_s: float = 60.0,
    ) -> None:
        self.pipeline = pipeline
        self.stream_stall_s = stream_stall_s  # the front ends a stream its client stalls
        self.keys = keys
        self.metrics = metrics
        self.models_for = models_for
        self.max_body = max_body
        self.new_id = new_id or RequestIds()  # the middleware's, so ids never repeat
        self.operations = operations or standard_operations()  # the endpoint kinds served
        self._by_path = self.operations.by_path
        self._openapi: bytes | None = None  # built on the first ask

    def install(self, app: web.Application) -> None:
        for path in self.operations.paths:
            app.router.add_post(path, self.inference)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/v1/models/{model}", self.model)
        app.router.add_get("/health", self.health)
        app.router.add_get("/", self.root)  # HEAD too: agents probe the base URL
        app.router.add_get("/favicon.ico", self.favicon)
        app.router.add_get("/openapi.json", self.openapi)

    async def _body(self, request: web.Request) -> bytes:
        if request.content_length is not None and request.content_length > self.max_body:
            raise too_large(request.content_length, self.max_body)
        return await request.read()

    async def run(self, rid: str, path: str, raw: bytes, headers: Mapping[str, str],
                  client: ClientLink | None = None) -> Reply:
        """One inference request (``path`` one of :attr:`operations`): the whole body, the
        request headers (looked up by lower-case name), the client's connection when the
        caller can tell that it closed (the upstream call is then cancelled when it
        does). Returns the reply or raises GatewayError."""
        op = self._by_path[path]
        ctx = RequestContext(rid, path, op, raw, headers)
        ctx.client = client
        try:
            reply = await self.pipeline.handle(ctx)
        except GatewayError as err:
            if err.status == 401:
                self.metrics.unauthenticated.inc()
            raise
        dialect = op.dialect
        if not dialect.renders or reply.status >= 300:
            return reply
        return rendered(reply, dialect, answer_info(ctx))

    async def inference(self, request: web.Request) -> web.StreamResponse:
        rid: str = request[REQUEST_ID]
        raw = await self._body(request)
        reply = await self.run(rid, request.path, raw, request.headers)
        if reply.stream is None:
            return web.Response(status=reply.status, body=reply.body,
                                headers=reply_headers(reply, rid))
        return await self._stream(request, rid, reply)

    async def _stream(self, request: web.Request, rid: str, reply: Reply) -> web.StreamResponse:
        assert reply.stream is not None
        resp = web.StreamResponse(status=reply.status, headers=stream_headers(reply, rid))
        stream, render = reply.stream, reply.render
        started = False
        try:
            await resp.prepare(request)
            started = True  # iterated from here: the stream's own finally cleans up
            if render is not None:
                await resp.write(render.start())
            async for event in stream:
                if render is not None:
                    event = render.feed(event)
                    if not event:
                        continue
                await resp.write(event)
        except (ConnectionResetError, ConnectionError):
            pass  # the client went away: closing the stream cancels the upstream
        finally:
            if not started and reply.abandon is not None:
                await reply.abandon()
            await stream.aclose()  # type: ignore[attr-defined]
        return resp

    def _principal(self, request: web.Request) -> Principal:
        return key_principal(self.keys, request.headers,
                             self.operations.dialect_for(request.path))

    async def models(self, request: web.Request) -> web.Response:
        principal = self._principal(request)
        data = [model_card(alias) for alias in self.models_for(principal.tenant)]
        return web.Response(body=orjson.dumps({"object": "list", "data": data}),
                            content_type=JSON)

    async def model(self, request: web.Request) -> web.Response:
        """``GET /v1/models/{id}``: one model the key may use, else 404 as OpenAI answers."""
        principal = self._principal(request)
        name = request.match_info["model"]
        if name not in self.models_for(principal.tenant):
            raise GatewayError(404, f"The model '{name}' does not exist or you do not have "
                               "access to it.", param="model", code="model_not_found")
        return web.Response(body=orjson.dumps(model_card(name)), content_type=JSON)

    async def root(self, request: web.Request) -> web.Response:
        """``/``: what this server is (clients probe it with ``HEAD``)."""
        return web.Response(body=orjson.dumps({"service": "tokenplane", "version": __version__}),
                            content_type=JSON)

    async def favicon(self, request: web.Request) -> web.Response:
        return web.Response(status=204, headers={"cache-control": "max-age=86400"})

    async def openapi(self, request: web.Request) -> web.Response:
        """The OpenAPI 3.1 document of the routes served (``api/openapi.py``); no key."""
        if self._openapi is None:
            self._openapi = orjson.dumps(openapi_document(self.operations, __version__))
        return web.Response(body=self._openapi, content_type=JSON)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(body=b'{"status":"ok"}', content_type=JSON)


OPENAI_ROUTES: web.AppKey[OpenAIRoutes] = web.AppKey("openai_routes", OpenAIRoutes)
