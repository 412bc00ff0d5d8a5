"""The overflow policy (``on_overflow``, docs/CONTEXT.md): what the tokens stage does
with a prompt that, with its output reservation, does not fit the model's window.

``reject`` (the default) leaves it to the window check (400
``context_length_exceeded``); ``trim_history`` drops the oldest turns
(``context/trim.py``) until the prompt fits the window less the reservation exactly;
``fallback`` moves the request to the model's ``overflow.fallback`` alias (a larger
window), counted again with that model's tokenizer. The policy is the app's (or its
tenant's) from ``context.apps``, else the model's ``overflow``; the reservation is the
request's ``max_tokens``, else the policy's ``reserve_output_tokens``. What was done
is on ``ctx.overflow`` for the ledger.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tokenplane.config.context_schema import AppOverflowConfig, ContextConfig, OnOverflow
from tokenplane.config.schema import ModelConfig
from tokenplane.context.trim import CannotFit, trim_history
from tokenplane.errors import GatewayError, invalid
from tokenplane.pipeline.context import PromptCount, RequestContext
from tokenplane.pipeline.context_use import OverflowUse
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.upstream.pool import Pool

DEFAULT_RESERVE = 1024


@dataclass(frozen=True, slots=True)
class Policy:
    action: OnOverflow
    reserve: int
    fallback: str | None


REJECT = Policy("reject", 1, None)


class Overflow:
    def __init__(self, models: list[ModelConfig], config: ContextConfig,
                 pools: Mapping[str, Pool], counters: ModelCounters,
                 allowed: Callable[[str], set[str] | None]) -> None:
        self.models = {m.alias: m for m in models}
        self.apps: dict[tuple[str, str | None], AppOverflowConfig] = {
            (a.tenant, a.app): a for a in config.apps}
        self.pools = pools
        self.counters = counters
        self.allowed = allowed
        self.any = bool(self.apps) or any(m.overflow is not None
                                          and m.overflow.on_overflow != "reject"
                                          for m in models)

    def policy(self, ctx: RequestContext) -> Policy:
        if ctx.model is None:
            return REJECT
        model = ctx.model.overflow
        p = ctx.principal
        app = None
        if p is not None and self.apps:
            app = self.apps.get((p.tenant, p.app)) or self.apps.get((p.tenant, None))
        action: OnOverflow = (app.on_overflow if app is not None
                              else model.on_overflow if model is not None else "reject")
        reserve = (app.reserve_output_tokens if app is not None
                   and app.reserve_output_tokens is not None else None) \
            or (model.reserve_output_tokens if model is not None
                else DEFAULT_RESERVE if action != "reject" else 1)
        fallback = model.fallback if model is not None else None
        if action == "fallback" and fallback is None:
            action = "reject"
        return Policy(action, reserve, fallback)

    def rejects(self, ctx: RequestContext) -> bool:
        return self.policy(ctx).action == "reject"

    def resolve(self, ctx: RequestContext, result: PromptCount) -> PromptCount:
        """The prompt's count after the policy acted (``result`` when it rejects)."""
        assert ctx.model is not None
        policy = self.policy(ctx)
        if policy.action == "reject" or not ctx.operation.generates:
            return result
        reserve = ctx.max_tokens or policy.reserve
        longest = result.longest  # a batch of prompts: each must fit, not their sum
        if (result.counts.prompt if longest is None else longest) + reserve \
                <= ctx.model.context_window:
            return result
        if policy.action == "trim_history":
            return self._trim(ctx, result, policy)
        if policy.action == "fallback" and policy.fallback is not None:
            return self._fallback(ctx, policy.fallback)
        return result

    def _count(self, ctx: RequestContext, body: dict[str, Any]) -> PromptCount:
        assert ctx.model is not None
        return self.counters.count(ctx.model, ctx.operation, body)

    def _trim(self, ctx: RequestContext, result: PromptCount, policy: Policy) -> PromptCount:
        assert ctx.model is not None
        field = ctx.operation.messages_field
        if field is None:
            return result
        body = ctx.body
        reserve = ctx.max_tokens or policy.reserve
        limit = ctx.model.context_window - reserve
        try:
            trimmed = trim_history(
                body[field], lambda msgs: self._count(ctx, {**body, field: msgs}).counts.prompt,
                limit, ctx.pinned)
        except CannotFit as exc:
            raise invalid(
                f"This model's maximum context length is {ctx.model.context_window} tokens. "
                f"The system prompt, the pinned messages and the current turn alone take "
                f"{exc.tokens} tokens, and {reserve} are reserved for the completion: "
                "trimming the history cannot make it fit.", param=field,
                code="context_length_exceeded") from None
        ctx.body = {**body, field: trimmed.messages}
        ctx.overflow = OverflowUse("trim_history", None, len(trimmed.dropped),
                                   trimmed.dropped_tokens)
        if "history_trimmed" not in ctx.flags:
            ctx.flags.append("history_trimmed")
        return self._count(ctx, ctx.body)

    def _fallback(self, ctx: RequestContext, target: str) -> PromptCount:
        assert ctx.model is not None and ctx.alias is not None
        allowed = self.allowed(ctx.principal.tenant) if ctx.principal is not None else None
        pool = self.pools.get(target)
        if pool is None or (allowed is not None and target not in allowed):
            raise GatewayError(
                400, f"The prompt does not fit '{ctx.alias}' and its overflow model "
                f"'{target}' is not available to this key.", param="model",
                code="context_length_exceeded")
        ctx.overflow = OverflowUse("fallback", ctx.alias)
        ctx.alias, ctx.pool, ctx.model = target, pool, pool.model
        if "overflow_fallback" not in ctx.flags:
            ctx.flags.append("overflow_fallback")
        return self._count(ctx, ctx.body)
