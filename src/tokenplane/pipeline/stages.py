"""The stages before the upstream call: auth -> validate -> tokens -> admission ->
schedule -> route. Each is a small class with one ``run(ctx)`` method."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tokenplane.config.schema import ModelConfig
from tokenplane.errors import GatewayError, invalid
from tokenplane.meta.keystore import KeyStore
from tokenplane.operations import validate as v
from tokenplane.operations.base import Operation
from tokenplane.pipeline.context import RequestContext
from tokenplane.tokens.counts import TokenCounts
from tokenplane.upstream.pool import Pool


class Stage(Protocol):
    async def run(self, ctx: RequestContext) -> None: ...


class Finisher(Protocol):
    """Runs once when a request ends, whatever the outcome (ok, error, cancelled)."""

    async def finish(self, ctx: RequestContext) -> None: ...


class AuthStage:
    """Resolves ``Authorization: Bearer <key>`` to a principal, or 401."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys

    async def run(self, ctx: RequestContext) -> None:
        auth = ctx.headers.get("authorization") or ""
        scheme, _, key = auth.partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            alt = ctx.headers.get("api-key")
            if not alt:
                raise GatewayError(
                    401,
                    "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
                    code="missing_api_key",
                )
            key = alt.strip()
        principal = self.keys.authenticate(key)
        if principal is None:
            raise GatewayError(401, "Incorrect API key provided.", code="invalid_api_key")
        ctx.principal = principal


class ValidateStage:
    """Checks the content type (415), parses the body, checks its fields, resolves the
    model alias for this key."""

    def __init__(self, pools: dict[str, Pool], allowed: Callable[[str], set[str] | None]) -> None:
        self.pools = pools
        self.allowed = allowed

    async def run(self, ctx: RequestContext) -> None:
        v.check_content_type(ctx.headers.get("content-type"))
        body = v.parse_json_object(ctx.raw)
        ctx.body = body
        op = ctx.operation
        op.validate(body)
        alias = body["model"]
        pool = self.pools.get(alias)
        tenant_models = self.allowed(ctx.principal.tenant) if ctx.principal else None
        if pool is None or (tenant_models is not None and alias not in tenant_models):
            raise GatewayError(  # 404 like OpenAI (and the governance allow-list)
                404, f"The model '{alias}' does not exist or you do not have access to it.",
                param="model", code="model_not_found", type_="invalid_request_error",
            )
        ctx.alias, ctx.pool, ctx.model = alias, pool, pool.model
        ctx.stream = bool(body.get("stream"))
        so = body.get("stream_options") or {}
        ctx.include_usage = bool(so.get("include_usage"))
        ctx.max_tokens = op.requested_max_tokens(body)
        window = pool.model.context_window
        if ctx.max_tokens is not None and ctx.max_tokens > window:
            param = op.cap_param(body)
            raise invalid(
                f"'{param}' is {ctx.max_tokens}, beyond the context window of '{alias}' "
                f"({window} tokens).", param=param, code="context_length_exceeded",
            )
        if ctx.principal is not None and isinstance(body.get("user"), str):
            ctx.principal = ctx.principal.with_end_user(body["user"])


class PromptCounter(Protocol):
    """Counts a request's prompt tokens by source before it runs."""

    def count(self, model: ModelConfig, operation: Operation, body: dict[str, Any]
              ) -> PromptCount: ...


class PromptCount(Protocol):
    counts: TokenCounts
    system_fingerprint: str | None
    exact: bool
    flags: frozenset[str]




class TokensStage:
    """Counts prompt tokens by source; refuses a prompt that cannot fit the window."""

    def __init__(self, counter: PromptCounter) -> None:
        self.counter = counter

    async def run(self, ctx: RequestContext) -> None:
        assert ctx.model is not None
        result = self.counter.count(ctx.model, ctx.operation, ctx.body)
        ctx.counts = result.counts
        ctx.system_fingerprint = result.system_fingerprint
        ctx.estimated_input_tokens = prompt = result.counts.prompt
        if result.flags:
            ctx.flags.extend(f for f in sorted(result.flags) if f not in ctx.flags)
        features = getattr(result, "features", None)
        if features:
            ctx.input_features = features
        if not ctx.operation.generates:
            return
        window = ctx.model.context_window
        need = prompt + (ctx.max_tokens or 1)
        if need > window:
            raise invalid(
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {need} tokens ({prompt} in the messages, "
                f"{ctx.max_tokens or 1} in the completion). Please reduce the length of the "
                "messages or completion.", param="messages", code="context_length_exceeded",
            )
