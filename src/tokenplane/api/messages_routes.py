"""``POST /v1/messages/count_tokens``: a Messages prompt's input tokens before it runs,
as Anthropic's endpoint answers (``{"input_tokens": N}``).

For a self-hosted alias the count is exact: the model's tokenizer and chat template,
tools included, by the same counter the token path uses. For an alias served by an
Anthropic backend (Claude has no public tokenizer) the backend's own
``count_tokens`` is asked when its ``anthropic.count_tokens`` is on, with the system
prompt and tool list's share asked once per fingerprint and kept (a coding agent
sends the same 20 tools on every turn); else the gateway's estimate. The answer's
``x-tokenplane-count`` header says which (``exact``, ``backend``, ``estimated``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tokenplane.api.key_auth import key_principal
from tokenplane.auth.scope_check import check_inference_scope
from tokenplane.dialects.anthropic.request import to_chat
from tokenplane.dialects.extensions import strip_extensions
from tokenplane.errors import GatewayError
from tokenplane.lru import Lru
from tokenplane.meta.keystore import KeyStore
from tokenplane.operations import validate as v
from tokenplane.operations.messages import MESSAGES
from tokenplane.routing.model_map import ModelMap
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.upstream.anthropic_transport import AnthropicTransport
from tokenplane.upstream.pool import Pool
from tokenplane.upstream.types import UpstreamRequest

PATH = "/v1/messages/count_tokens"
PREFIX_MEMO = 1024  # system prompt + tool list shares kept, per worker
_PROBE = [{"role": "user", "content": "."}]


def prefix_fingerprint(body: dict[str, Any]) -> str:
    """What identifies a Messages body's system prompt and tool list."""
    key = orjson.dumps([body.get("model"), body.get("system"), body.get("tools")],
                       option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(key).hexdigest()


class MessagesRoutes:
    def __init__(self, keys: KeyStore, pools: dict[str, Pool],
                 allowed: Callable[[str], set[str] | None], model_map: ModelMap,
                 counters: ModelCounters) -> None:
        self.keys = keys
        self.pools = pools
        self.allowed = allowed
        self.model_map = model_map
        self.counters = counters
        self._prefixes: Lru[str, int] = Lru(PREFIX_MEMO)

    def install(self, app: web.Application) -> None:
        app.router.add_post(PATH, self.count_tokens)

    async def count_tokens(self, request: web.Request) -> web.Response:
        dialect = MESSAGES.dialect
        principal = key_principal(self.keys, request.headers, dialect)
        check_inference_scope(principal)  # a read-only key counts no prompt
        v.check_content_type(request.headers.get("content-type"))
        raw = v.parse_json_object(await request.read())
        if "max_tokens" in raw:
            raise GatewayError(400, "count_tokens takes no 'max_tokens'", param="max_tokens",
                               code="invalid_request")
        body = {**raw, "max_tokens": 1}
        body.pop("stream", None)
        canonical = to_chat(body)
        name = canonical["model"]
        alias = self.model_map.resolve(principal.tenant, name)
        pool = self.pools.get(alias)
        allowed = self.allowed(principal.tenant)
        if pool is None or (allowed is not None and alias not in allowed):
            raise GatewayError(404, f"The model '{name}' does not exist or you do not have "
                               "access to it.", param="model", code="model_not_found")
        n, how = await self._count(pool, alias, raw, canonical, dict(request.headers))
        return web.Response(body=orjson.dumps({"input_tokens": n}),
                            content_type="application/json",
                            headers={"x-tokenplane-count": how})

    async def _count(self, pool: Pool, alias: str, raw: dict[str, Any],
                     canonical: dict[str, Any], headers: dict[str, str]) -> tuple[int, str]:
        model = pool.model
        backend = next((e for e in pool.endpoints
                        if isinstance(e.transport, AnthropicTransport)), None)
        opts = backend.backend.anthropic if backend is not None else None
        if opts is not None and not opts.count_tokens:
            backend = None
        if backend is not None:
            assert isinstance(backend.transport, AnthropicTransport)
            n = await self._backend_count(backend.transport, backend.upstream_model, raw,
                                          UpstreamRequest(PATH, b"", False,
                                                          backend.backend.timeouts,
                                                          client_headers=headers))
            if n is not None:
                return n, "backend"
        result = self.counters.count(model, MESSAGES, strip_extensions(canonical))
        return result.counts.prompt, ("exact" if result.exact else "estimated")

    async def _backend_count(self, transport: AnthropicTransport, upstream_model: str,
                             raw: dict[str, Any], req: UpstreamRequest) -> int | None:
        """The backend's count: the messages asked each time, the system prompt and tool
        list's share once per fingerprint."""
        body = {**raw, "model": upstream_model}
        if "system" not in body and "tools" not in body:
            return await transport.count_tokens(body, req)
        fp = prefix_fingerprint(body)
        share = self._prefixes.get(fp)
        if share is None:
            with_prefix = await transport.count_tokens(
                {k: v for k, v in body.items() if k != "messages"} | {"messages": _PROBE}, req)
            bare = await transport.count_tokens({"model": upstream_model, "messages": _PROBE},
                                                req)
            if with_prefix is None or bare is None:
                return None
            share = max(0, with_prefix - bare)
            self._prefixes.put(fp, share)
        rest = {k: v for k, v in body.items() if k not in ("system", "tools", "tool_choice")}
        n = await transport.count_tokens(rest, req)
        return None if n is None else n + share
