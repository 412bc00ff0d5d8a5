"""The audit finisher: one tamper-evident record per request, built from the request
context and handed to :class:`~tokenplane.governance.audit.service.AuditService`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.service import AuditService
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.governance.guard_state import BLOCK_CODES, GuardState
from tokenplane.governance.pii_policy import redact, scan
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.upstream_call import relayed_text


class AuditFinisher:
    """Builds the request's :class:`AuditEntry` and hands it to the audit thread."""

    def __init__(self, audit: AuditService, policies: GuardPolicies,
                 clock: Callable[[], float] = time.time) -> None:
        self.audit = audit
        self.policies = policies
        self.clock = clock
        self.keep_content = audit.config.retention != "none"

    async def finish(self, ctx: RequestContext) -> None:
        self.audit.submit(self.entry(ctx), self.clock())

    def entry(self, ctx: RequestContext) -> AuditEntry:
        p = ctx.principal
        state = ctx.guard
        verdicts: dict[str, Any] = {}
        content = None
        flagged = False
        if isinstance(state, GuardState):
            policy = state.policy
            # response rules that only log: findings here, on the text the client got
            log_only = policy.response if not policy.response_rewrites else None
            response = None
            if ctx.upstream_start is not None and (self.keep_content or log_only is not None) \
                    and (ctx.stream or state.response_body):  # else: nothing to read
                response = _response(ctx, state)
            if log_only is not None and response:
                state.note_pii("response", scan(_text_of(response), log_only))
            verdicts = dict(state.verdicts)
            flagged = state.flagged
            if self.keep_content:
                content = {"request": state.request_content, "response": response}
        error = ctx.error_code
        if error:
            verdicts["error"] = error
        tenant, key_id, principal, app = "", None, None, None
        if p is not None:
            tenant, key_id, app = p.tenant, p.key_id, p.app
            if p.end_user:
                principal = redact(p.end_user, self.policies.analyzer)
        return AuditEntry(  # positional, in the field order: cheaper than keywords
            ctx.request_id, tenant, key_id, principal, app, ctx.alias,
            ctx.endpoint.id if ctx.endpoint is not None else None, ctx.http_status,
            _tokens(ctx), _limits(ctx, self.policies.analyzer),
            verdicts, _verdict(error, flagged, isinstance(state, GuardState)), content,
            _session(ctx))


def _session(ctx: RequestContext) -> dict[str, Any] | None:
    """The agent session's step and the digests of the tool results its prompt carries
    (what links a step to the MCP calls that produced them)."""
    s = ctx.session
    if s is None:
        return None
    out: dict[str, Any] = {"id": s.session_id, "step": s.step}
    if s.tool_results:
        out["tool_results"] = list(s.tool_results)
    return out


def _verdict(error: str | None, flagged: bool, screened: bool) -> str:
    """What governance decided: block, flag, allow; or ``unscreened`` for a request
    that ended before the input guard saw it (a 400 / 404 / 415 of the checks before
    it), of which governance decided nothing. What happened is the record's status."""
    if error in BLOCK_CODES:
        return "block"
    if flagged:
        return "flag"
    return "allow" if screened else "unscreened"


def _tokens(ctx: RequestContext) -> dict[str, int]:
    """The request's non-zero token counts (each field of TokenCounts, read one by
    one: cheaper than a dict of them all) and the upstream's usage figures."""
    c = ctx.counts
    out: dict[str, int] = {}
    if c.system:
        out["system"] = int(c.system)
    if c.history:
        out["history"] = int(c.history)
    if c.context:
        out["context"] = int(c.context)
    if c.tools:
        out["tools"] = int(c.tools)
    if c.user:
        out["user"] = int(c.user)
    if c.cached:
        out["cached"] = int(c.cached)
    if c.output:
        out["output"] = int(c.output)
    if c.reasoning:
        out["reasoning"] = int(c.reasoning)
    usage = ctx.usage
    if usage:
        value = usage.get("prompt_tokens")
        if isinstance(value, int):
            out["prompt_tokens"] = value
        value = usage.get("completion_tokens")
        if isinstance(value, int):
            out["completion_tokens"] = value
    return out


def _limits(ctx: RequestContext, analyzer: Analyzer) -> dict[str, Any]:
    """The admission limits bound to the request: scope (an end user's id redacted),
    rule name, kind, unit and limit."""
    if ctx.ticket is None:
        return {}
    applied = []
    for b in ctx.ticket.grant.limits:
        scope, rule = b.scope, b.rule
        where = f"{scope.kind}:{redact(str(scope.id), analyzer)}"
        applied.append({"scope": where + (f"@{scope.model}" if scope.model else ""),
                        "rule": str(rule.name), "kind": str(rule.kind), "unit": str(rule.unit),
                        "limit": rule.limit})
    return {"applied": applied} if applied else {}


def _response(ctx: RequestContext, state: GuardState | None) -> Any:
    op = ctx.operation
    if not op.generates:
        return None  # vectors, not content
    if ctx.stream:
        text, reasoning = relayed_text(ctx)
        return {"text": text, "reasoning": reasoning} if reasoning else text
    body = state.response_body if state is not None else None
    if not body:
        return None
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return op.answer_record(obj)


def _text_of(response: Any) -> str:
    if isinstance(response, str):
        return response
    if isinstance(response, dict):
        return " ".join(str(v) for v in response.values() if v)
    return ""
