"""The MCP gateway's HTTP face (docs/MCP.md): streamable HTTP at ``/mcp`` (every server
the key may use, names ``server__tool``) and ``/mcp/{server}``.

    POST   one JSON-RPC message; the answer as ``application/json`` (202 for a
           notification); ``initialize`` returns the ``Mcp-Session-Id`` later messages send
    DELETE ends the session
    GET    405: the gateway opens no server-to-client stream

Every refusal, the key's included, is a JSON-RPC error object, never the OpenAI
envelope. Served by the aiohttp app behind the front (not an inference route)."""

from __future__ import annotations

import logging

import orjson
from aiohttp import web

from tokenplane.api.openai_routes import REQUEST_ID
from tokenplane.auth.principal import Principal
from tokenplane.auth.roles import inference_problem, role_of
from tokenplane.mcp import jsonrpc
from tokenplane.mcp.gateway.service import SESSION_HEADER, Caller, McpService, Reply
from tokenplane.meta.keystore import KeyStore

log = logging.getLogger("tokenplane.mcp")
UNAUTHORIZED = -32001
JSON = "application/json"


class McpRoutes:
    def __init__(self, keys: KeyStore, service: McpService) -> None:
        self.keys = keys
        self.service = service

    def install(self, app: web.Application) -> None:
        for path in ("/mcp", "/mcp/{server}"):
            app.router.add_post(path, self.post)
            app.router.add_delete(path, self.delete)
            app.router.add_get(path, self.get)

    async def post(self, request: web.Request) -> web.StreamResponse:
        caller = self._caller(request)
        if isinstance(caller, web.Response):
            return caller
        body = await _read(request, self.service.max_bytes)
        try:
            return _answer(await self.service.post(caller, body))
        except Exception:  # a bug: still a JSON-RPC answer, and logged
            log.exception("mcp: internal error on %s", request.path)
            err = jsonrpc.RpcError(jsonrpc.INTERNAL_ERROR, "Internal error", status=500)
            return _answer(Reply(500, err.body(None)))

    async def delete(self, request: web.Request) -> web.StreamResponse:
        caller = self._caller(request)
        if isinstance(caller, web.Response):
            return caller
        return _answer(await self.service.delete(caller))

    async def get(self, request: web.Request) -> web.StreamResponse:
        caller = self._caller(request)
        if isinstance(caller, web.Response):
            return caller
        err = jsonrpc.RpcError(jsonrpc.METHOD_NOT_FOUND, "This gateway opens no "
                               "server-to-client stream: POST JSON-RPC messages", status=405)
        reply = Reply(405, err.body(None), {"allow": "POST, DELETE"})
        return _answer(reply)

    def _caller(self, request: web.Request) -> Caller | web.Response:
        principal = self._principal(request)
        if principal is None:
            err = jsonrpc.RpcError(UNAUTHORIZED, "Unauthorized: send a tokenplane API key as "
                                   "'Authorization: Bearer <key>'", status=401)
            return _answer(Reply(401, err.body(None), {"www-authenticate": "Bearer"}))
        problem = inference_problem(role_of(principal.admin, principal.role))
        if problem is not None:  # a read-only key calls no tools (auth/scope_check.py)
            return _answer(Reply(403, jsonrpc.RpcError(UNAUTHORIZED, problem,
                                                       status=403).body(None), {}))
        h = request.headers
        return Caller(principal, request.match_info.get("server"),
                      session_id=h.get(SESSION_HEADER) or None,
                      model=(h.get("x-tokenplane-model") or "").strip() or None,
                      agent_session=(h.get("x-tokenplane-session")
                                     or h.get("x-claude-code-session-id") or "").strip() or None,
                      request_id=str(request.get(REQUEST_ID, "")))

    def _principal(self, request: web.Request) -> Principal | None:
        scheme, _, key = (request.headers.get("authorization") or "").partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            return None
        return self.keys.authenticate(key)


async def _read(request: web.Request, limit: int) -> bytes:
    """The body, or its first ``limit + 1`` bytes when it is larger (the service refuses
    it naming the limit; the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = await request.content.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _answer(reply: Reply) -> web.Response:
    if reply.body is None:
        return web.Response(status=reply.status, headers=reply.headers)
    return web.Response(status=reply.status, body=orjson.dumps(reply.body),
                        content_type=JSON, headers=reply.headers)
