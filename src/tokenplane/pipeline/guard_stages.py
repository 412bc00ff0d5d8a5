"""The input guard (after validation, before token counting, so counts see what is
actually sent) and the context-size policy (after counting).

Input guard, in order: allowed models of the app, tool definitions (reject / strip),
the output-token cap, the prompt-injection screen (new user turn and the tool results
after it), then the PII policy on messages, tool results and prompts (mask, tokenize
into the request's vault, or block naming the entity types). RAG documents were
screened around the packer (``pipeline/document_guard.py``); when PII rules that
rewrite were applied to them there, the message they became is not scanned again.

A chat message in which nothing is found (for most, the analyzer's gates prove it in a
few C-level scans) is passed on as it is, no copy; when no message changes, neither
does the body.
"""

from __future__ import annotations

import logging
from typing import Any

from tokenplane.errors import GatewayError, invalid
from tokenplane.governance.guard_policy import GuardPolicies, GuardPolicy
from tokenplane.governance.guard_state import (
    INJECTION_FLAG,
    INJECTION_HEADER,
    GuardState,
)
from tokenplane.governance.injection.detector import Source, Verdict
from tokenplane.governance.injection.screen import (
    InjectionAction,
    InjectionBlocked,
    clean,
    decide,
)
from tokenplane.governance.pii_messages import apply_messages
from tokenplane.governance.pii_policy import PiiBlocked, PiiPolicy, apply
from tokenplane.governance.vault import Vault
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.operations.base import Operation
from tokenplane.pipeline.context import RequestContext

log = logging.getLogger("tokenplane.governance")


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def screened_texts(operation: Operation, body: dict[str, Any]) -> list[tuple[str, Source]]:
    """The texts the injection screen reads: the last user message and the tool
    results after it (a messages prompt), or the prompt strings (another kind that
    generates; nothing for embeddings)."""
    field = operation.messages_field
    if field is not None:
        messages = body.get(field, [])
        return _chat_screened(messages if isinstance(messages, list) else list(messages))
    if operation.generates:
        prompt = body.get(operation.content_field)
        items = [prompt] if isinstance(prompt, str) else prompt if isinstance(prompt, list) else []
        return [(p, "user") for p in items if isinstance(p, str) and p]
    return []


def _chat_screened(messages: list[Any]) -> list[tuple[str, Source]]:
    """:func:`screened_texts` of a chat, read from the end back to the last user turn."""
    user: dict[str, Any] | None = None
    tools: list[str] = []
    for m in reversed(messages):
        if isinstance(m, dict):
            role = m.get("role")
            if role == "user":
                user = m
                break
            if role == "tool":
                tools.append(message_text(m))
    out: list[tuple[str, Source]] = []
    if user is not None:
        content = user.get("content")
        text = content if isinstance(content, str) else message_text(user)
        if text:
            out.append((text, "user"))
    for text in reversed(tools):
        if text:
            out.append((text, "tool"))
    return out


def check_model(alias: str | None, pol: GuardPolicy) -> None:
    """404 for a model alias outside the app's ``models`` list."""
    if pol.models is not None and alias not in pol.models:
        raise GatewayError(404, f"The model '{alias}' does not exist or you do not have "
                           "access to it.", code="model_not_found", param="model",
                           type_="invalid_request_error")


class InputGuardStage:
    """Applies the principal's governance policy to the request body (the guard state
    the context stage made for the RAG documents, if any, is kept)."""

    def __init__(self, policies: GuardPolicies, metrics: GatewayMetrics | None = None) -> None:
        self.policies = policies
        self.metrics = metrics

    async def run(self, ctx: RequestContext) -> None:
        principal = ctx.principal
        if principal is None:
            return
        state = ctx.guard
        if state is None:
            state = ctx.guard = GuardState(
                self.policies.for_principal(principal.tenant, principal.app))
        pol = state.policy
        body = ctx.body
        operation = ctx.operation
        state.request_content = body.get(operation.content_field)
        check_model(ctx.alias, pol)
        if operation.tools and pol.tools.allowed is not None:
            before = {_name(t) for t in body.get("tools") or []}
            body = pol.tools.check_request(body)  # ToolNotAllowed -> 400 in reject mode
            stripped = sorted(before - {_name(t) for t in body.get("tools") or []})
            if stripped:
                state.verdicts["tools"] = {"stripped": stripped}
        if operation.generates and pol.max_output_tokens is not None:
            body = _cap_output(ctx, pol, body)
        if pol.injection is not None:
            self._screen(ctx, state, pol, body)
        if pol.prompt is not None or pol.tool_results is not None:
            body = self._pii(ctx, state, pol, body)
        ctx.body = body

    def _screen(self, ctx: RequestContext, state: GuardState, pol: GuardPolicy,
                body: dict[str, Any]) -> None:
        assert pol.injection is not None
        field = ctx.operation.messages_field
        messages = body.get(field) if field is not None else None
        texts = (_chat_screened(messages) if isinstance(messages, list)
                 else screened_texts(ctx.operation, body))
        if not texts:
            return
        detector = self.policies.detector
        scored: list[tuple[Verdict, Source]] = []
        quiet = pol.injection_quiet  # the policy does nothing when nothing is found
        for text, source in texts:
            verdict = detector.score(text, source)
            scored.append((verdict, source))
            if quiet and not clean(verdict):
                quiet = False
        if quiet:
            return
        try:
            result = decide(scored, pol.injection)
        except InjectionBlocked as exc:
            state.verdicts["injection"] = {"action": "block", "score": round(exc.verdict.score, 3),
                                           "labels": list(exc.verdict.labels)}
            self._count(ctx, "block")
            raise
        if result.action is InjectionAction.NONE:
            return
        self._count(ctx, result.action.value)
        v = result.verdict
        state.verdicts["injection"] = {"action": result.action.value, "score": round(v.score, 3),
                                       "labels": list(v.labels), "source": result.source}
        log.info("request %s: injection screen %s (score %.2f, %s)", ctx.request_id,
                 result.action.value, v.score, ",".join(v.labels))
        if result.action is InjectionAction.FLAG:
            state.flagged = True
            ctx.response_headers[INJECTION_HEADER] = "flagged"
            if INJECTION_FLAG not in ctx.flags:
                ctx.flags.append(INJECTION_FLAG)

    def _count(self, ctx: RequestContext, action: str) -> None:
        if self.metrics is not None:
            self.metrics.injection_verdicts.labels("messages", action, ctx.tenant or "").inc()

    def _pii(self, ctx: RequestContext, state: GuardState, pol: GuardPolicy,
             body: dict[str, Any]) -> dict[str, Any]:
        if pol.prompt is None and pol.tool_results is None:
            return body
        field = ctx.operation.messages_field
        if field is not None:
            given = body.get(field, [])
            if not isinstance(given, list):
                given = list(given)  # iterated as it was; sent on as a list
            messages, blocked, changed = _guard_messages(given, pol, state)
            if blocked:
                state.note_blocked("prompt", blocked)
                raise PiiBlocked(blocked)
            if not changed and given is body.get(field):
                return body  # nothing changed: no copy
            return {**body, field: messages}
        if pol.prompt is None:
            return body
        key = ctx.operation.content_field
        value = body.get(key)
        vault = state.vault
        try:
            if isinstance(value, str):
                return {**body, key: _apply_text(value, pol.prompt, vault, state)}
            if isinstance(value, list) and any(isinstance(v, str) for v in value):
                return {**body, key: [_apply_text(v, pol.prompt, vault, state)
                                      if isinstance(v, str) else v for v in value]}
        except PiiBlocked as exc:
            state.note_blocked("prompt", exc.entity_types)
            raise
        return body


def _apply_text(text: str, policy: PiiPolicy, vault: Vault, state: GuardState) -> str:
    new, found = apply(text, policy, vault)
    state.note_pii("prompt", found)
    return new


def _guard_messages(messages: list[Any], pol: GuardPolicy,
                    state: GuardState) -> tuple[list[Any], list[str], bool]:
    """The messages with the policy applied, the entity types blocked, and whether
    any message changed (was copied). The list is copied only from the first message
    the policy has something to do with: until then, ``messages`` is the answer."""
    out: list[Any] | None = None
    blocked: list[str] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m is state.screened_message:  # (documents: done)
            if out is not None:
                out.append(m)
            continue
        tool = m.get("role") == "tool"
        policy = pol.tool_results if tool else pol.prompt
        if policy is None:
            if out is not None:
                out.append(m)
            continue
        where = "tool_results" if tool else "prompt"
        content = m.get("content")
        if isinstance(content, str):  # the common case, without a call more
            untouched = policy.analyzer.nothing_in(content)
        else:
            untouched = _parts_clean(content, policy)
        if untouched and not isinstance(m.get("tool_calls"), list):
            state.note_pii(where)  # scanned, clean: passed on as it is
            if out is not None:
                out.append(m)
            continue
        if out is None:
            out = messages[:i]
        try:
            new, findings = apply_messages([m], policy, state.vault)
            state.note_pii(where, (f.finding for f in findings))
            msg = new[0]
            if isinstance(msg.get("tool_calls"), list):
                msg["tool_calls"] = [_guard_call(c, policy, state) for c in msg["tool_calls"]]
            out.append(msg)
        except PiiBlocked as exc:
            blocked.extend(exc.entity_types)
            out.append(m)
    if out is None:
        return messages, [], False
    return out, sorted(set(blocked)), True


def _parts_clean(content: Any, policy: PiiPolicy) -> bool:
    """True when nothing is found in the text of any content part (the message is
    then left as it is); content neither a string nor parts has none."""
    if not isinstance(content, list):
        return True
    nothing_in = policy.analyzer.nothing_in
    return all(nothing_in(p["text"]) for p in content
               if isinstance(p, dict) and isinstance(p.get("text"), str))


def _guard_call(call: Any, policy: PiiPolicy, state: GuardState) -> Any:
    """Earlier tool calls' arguments (assistant history) under the prompt policy."""
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("arguments"), str):
        return call
    args, found = apply(fn["arguments"], policy, state.vault)
    state.note_pii("prompt", found)
    return {**call, "function": {**fn, "arguments": args}} if found else call


def _name(tool: Any) -> str:
    fn = tool.get("function") if isinstance(tool, dict) else None
    return str(fn.get("name")) if isinstance(fn, dict) else ""


def _cap_output(ctx: RequestContext, pol: GuardPolicy, body: dict[str, Any]) -> dict[str, Any]:
    cap = pol.max_output_tokens
    if cap is None:
        return body
    if ctx.max_tokens is not None:
        if ctx.max_tokens > cap:
            param = ctx.operation.cap_param(body)
            raise invalid(f"'{param}' is {ctx.max_tokens}; this key may ask for at most {cap} "
                          "output tokens.", param=param, code="output_limit_exceeded")
        return body
    ctx.max_tokens = cap
    return {**body, "max_tokens": cap}


class ContextPolicyStage:
    """After counting: refuses a prompt above the principal's context-token cap."""

    async def run(self, ctx: RequestContext) -> None:
        state = ctx.guard
        cap = state.policy.max_context_tokens if state is not None else None
        if cap is not None and ctx.counts.prompt > cap:
            raise invalid(f"The prompt has {ctx.counts.prompt} tokens; this key may send at "
                          f"most {cap}.", param="messages", code="context_limit_exceeded")

