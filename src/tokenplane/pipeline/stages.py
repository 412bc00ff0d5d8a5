"""The stages before the upstream call: auth -> validate -> [early count] -> tokens
-> admission -> schedule -> route. Each is a small class with one ``run(ctx)`` method.

A large request (a body of ``OFFLOAD_BYTES`` or more) is first held against the
floor of its prompt's tokens (``tokens/char_floor.py``: from its characters, without
tokenizing, never above the count): one that cannot fit the context window is
refused at once. What may fit is counted off the event loop, in turn per tenant
(``pipeline/count_offload.py``); with governance, before the input guard's scans
(as costly as counting) when the guard cannot change the prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

from tokenplane.auth.principal import Principal
from tokenplane.auth.scope_check import check_inference_scope
from tokenplane.config.schema import ModelConfig
from tokenplane.dialects.base import api_key
from tokenplane.errors import GatewayError, invalid
from tokenplane.meta.keystore import KeyStore
from tokenplane.operations import validate as v
from tokenplane.operations.base import Operation
from tokenplane.pipeline.context import EarlyCount, PromptCount, RequestContext
from tokenplane.pipeline.count_offload import OFFLOAD_BYTES, CountOffload
from tokenplane.pipeline.overflow import Overflow
from tokenplane.routing.model_map import ModelMap
from tokenplane.upstream.pool import Pool


class Stage(Protocol):
    async def run(self, ctx: RequestContext) -> None: ...


class Finisher(Protocol):
    """Runs once when a request ends, whatever the outcome (ok, error, cancelled)."""

    async def finish(self, ctx: RequestContext) -> None: ...


class AuthStage:
    """Resolves the API key, sent in one of the headers the request's dialect accepts
    (``Authorization: Bearer <key>``, ``api-key``, ``x-api-key``), to a principal, or 401."""

    def __init__(self, keys: KeyStore) -> None:
        self.keys = keys

    async def run(self, ctx: RequestContext) -> None:
        dialect = ctx.operation.dialect
        key = api_key(ctx.headers, dialect.auth_headers)
        if key is None:
            raise GatewayError(
                401, f"You didn't provide an API key. Send it as {dialect.auth_hint}.",
                code="missing_api_key",
            )
        principal = self.keys.authenticate(key)
        if principal is None:
            raise GatewayError(401, "Incorrect API key provided.", code="invalid_api_key")
        check_inference_scope(principal)  # auth/scope_check.py: read-only keys stop here
        ctx.principal = principal


class ValidateStage:
    """Checks the content type (415), parses the body, checks its fields, resolves the
    model alias for this key."""

    def __init__(self, pools: dict[str, Pool], allowed: Callable[[str], set[str] | None],
                 model_map: ModelMap | None = None) -> None:
        self.pools = pools
        self.allowed = allowed
        self.model_map = model_map or ModelMap()

    async def run(self, ctx: RequestContext) -> None:
        v.check_content_type(ctx.headers.get("content-type"))
        op = ctx.operation
        body = ctx.body = op.canonical(v.parse_json_object(ctx.raw))
        alias = body["model"]
        if self.model_map:
            mapped = self.model_map.resolve(ctx.tenant, alias)
            if mapped != alias:
                ctx.requested_model = alias
                body["model"] = alias = mapped
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

    def floor(self, model: ModelConfig, operation: Operation, body: dict[str, Any]
              ) -> int | None:
        """The fewest tokens the prompt can have, without tokenizing; None: unknown."""
        ...


def beyond_window(ctx: RequestContext, prompt: int, output: int, floor: bool = False
                  ) -> GatewayError:
    window = ctx.model.context_window if ctx.model is not None else 0
    field = ctx.operation.content_field
    least = "at least " if floor else ""
    return invalid(
        f"This model's maximum context length is {window} tokens. However, you "
        f"requested {least}{prompt + output} tokens ({least}{prompt} in the {field}, "
        f"{output} in the completion). Please reduce the length of the {field} or "
        "completion.", param=field, code="context_length_exceeded",
    )


def window_prompt(result: PromptCount) -> int:
    """The prompt tokens that must fit the context window: the prompt's, or a batch's
    longest prompt's (each prompt of a batch is its own sequence upstream)."""
    longest = result.longest
    return result.counts.prompt if longest is None else longest


class EarlyCountStage:
    """Before the input guard, whose scans of a large prompt cost about as much as
    counting it: a large prompt that the principal's guard cannot change (no PII
    masking or tokenizing, no tools stripped) is held against its floor and counted
    off the loop here, and refused if it cannot fit the window with the one output
    token the guard's cap could leave; the tokens stage takes the count."""

    def __init__(self, tokens: TokensStage, changes: Callable[[Principal], bool]) -> None:
        self.tokens = tokens
        self.changes = changes

    async def run(self, ctx: RequestContext) -> None:
        if len(ctx.raw) < OFFLOAD_BYTES or ctx.principal is None or ctx.model is None \
                or self.tokens.offload is None or self.changes(ctx.principal):
            return
        result = await self.tokens.count_large(ctx, 1)
        body, field = ctx.body, ctx.operation.content_field
        ctx.early_count = EarlyCount(body.get(field), body.get("tools"), result)
        prompt = window_prompt(result)
        if ctx.operation.generates and prompt + 1 > ctx.model.context_window \
                and self.tokens.rejects(ctx):
            raise beyond_window(ctx, prompt, 1)


class TokensStage:
    """Counts prompt tokens by source; refuses a prompt that cannot fit the window
    (a large one first by its floor, before it is counted, off the loop), unless the
    overflow policy trims its history or moves it to a larger model
    (``pipeline/overflow.py``)."""

    def __init__(self, counter: PromptCounter, offload: CountOffload | None = None,
                 overflow: Overflow | None = None) -> None:
        self.counter = counter
        self.offload = offload
        self.overflow = overflow if overflow is not None and overflow.any else None

    def rejects(self, ctx: RequestContext) -> bool:
        """Whether a prompt over the window is refused (no overflow policy acts)."""
        return self.overflow is None or self.overflow.rejects(ctx)

    async def count_large(self, ctx: RequestContext, output: int) -> PromptCount:
        """A large prompt: refused by its floor if that plus ``output`` tokens cannot
        fit the window, else counted on a worker thread in its tenant's turn."""
        assert ctx.model is not None and self.offload is not None
        if ctx.operation.generates:
            floor = self.counter.floor(ctx.model, ctx.operation, ctx.body)
            if floor is not None and floor + output > ctx.model.context_window \
                    and self.rejects(ctx):
                raise beyond_window(ctx, floor, output, floor=True)
        tenant = ctx.principal.tenant if ctx.principal is not None else ""
        return await self.offload.run(tenant, functools.partial(
            self.counter.count, ctx.model, ctx.operation, ctx.body))

    async def run(self, ctx: RequestContext) -> None:
        assert ctx.model is not None
        early = ctx.early_count
        if len(ctx.raw) < OFFLOAD_BYTES or self.offload is None:
            result = self.counter.count(ctx.model, ctx.operation, ctx.body)
        elif early is not None and early.prompt is ctx.body.get(ctx.operation.content_field) \
                and early.tools is ctx.body.get("tools"):
            result = early.result
        else:
            result = await self.count_large(ctx, ctx.max_tokens or 1)
        if self.overflow is not None:
            result = self.overflow.resolve(ctx, result)
        ctx.counts = result.counts
        ctx.system_fingerprint = result.system_fingerprint
        ctx.estimated_input_tokens = result.counts.prompt
        if result.flags:
            ctx.flags.extend(f for f in sorted(result.flags) if f not in ctx.flags)
        features = getattr(result, "features", None)
        if features:
            ctx.input_features = features
        if not ctx.operation.generates:
            return
        window = ctx.model.context_window
        longest = result.longest  # a batch of prompts: its longest one must fit
        fits = result.counts.prompt if longest is None else longest
        need = fits + (ctx.max_tokens or 1)
        if need > window:
            raise invalid(
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {need} tokens ({fits} in the messages, "
                f"{ctx.max_tokens or 1} in the completion). Please reduce the length of the "
                "messages or completion.", param="messages", code="context_length_exceeded",
            )
