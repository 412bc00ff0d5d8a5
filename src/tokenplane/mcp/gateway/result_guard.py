"""What happens to a tool's result before it leaves the gateway: the injection screen
(the caller's policy), the count in the accounting model's tokens, ``max_result_tokens``
(cut or refused), and the digests that link it to the model requests carrying it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tokenplane.auth.principal import Principal
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.governance.injection.screen import InjectionAction, InjectionBlocked, screen
from tokenplane.mcp import jsonrpc
from tokenplane.mcp.gateway.audit import McpAuditEntry
from tokenplane.mcp.gateway.metrics import McpMetrics
from tokenplane.mcp.gateway.sessions import McpSession
from tokenplane.mcp.jsonrpc import RpcError
from tokenplane.mcp.names import qualify
from tokenplane.mcp.policy import McpPolicy
from tokenplane.mcp.results import result_texts, structured_json, truncate
from tokenplane.sessions.tool_links import forwarded_digests
from tokenplane.tokens.base import Tokenizer

Labels = Callable[[str | None, str | None, str], tuple[str, str]]


@dataclass
class Accounting:
    """What counts a result's tokens: the model alias a tenant's results are counted
    for, and that alias's tokenizer."""

    default_model: Callable[[str], str | None]  # tenant -> alias
    allowed: Callable[[str, str], bool]  # (tenant, alias) -> may use it
    tokenizer: Callable[[str], Tokenizer]


class ResultGuard:
    def __init__(self, policy: McpPolicy, accounting: Accounting, metrics: McpMetrics,
                 guards: GuardPolicies | None, labels: Labels) -> None:
        self.policy = policy
        self.accounting = accounting
        self.metrics = metrics
        self.guards = guards
        self.labels = labels  # metric labels a client cannot multiply

    def model_for(self, p: Principal, session: McpSession) -> str | None:
        """The alias whose tokenizer counts the results: the session's (named at
        ``initialize``), else ``mcp.accounting_model``, else the tenant's first."""
        if session.model is not None:
            return session.model
        configured = self.policy.config.accounting_model
        if configured is not None and self.accounting.allowed(p.tenant, configured):
            return configured
        return self.accounting.default_model(p.tenant)

    def result(self, p: Principal, session: McpSession, entry: McpAuditEntry, result: Any,
               limit: int | None, overflow: str) -> Any:
        """The result to forward (cut to ``limit`` tokens), the record completed.
        Raises RpcError: an injection blocked, a result over ``limit`` refused."""
        entry.result_bytes = len(orjson.dumps(result))
        texts = result_texts(result)
        entry.content = {**(entry.content or {}), "result": texts}
        self.screen(p, texts, entry)
        entry.result_digests = forwarded_digests(texts, structured_json(result))
        model = self.model_for(p, session)
        if model is None or not isinstance(result, dict):
            return result
        tokenizer = self.accounting.tokenizer(model)
        entry.model = model
        count = tokenizer.count
        if limit is None:
            entry.tokens = {"result": sum(count(t) for t in texts)}
            return result
        cut = truncate(result, limit, tokenizer, count)
        entry.tokens = {"result": cut.tokens_after, "upstream": cut.tokens_before}
        if not cut.truncated:
            return result
        name = qualify(str(entry.server), str(entry.name))
        if overflow == "refuse":
            reason = (f"{name}: the result has {cut.tokens_before} tokens, over "
                      f"max_result_tokens {limit}")
            entry.decision, entry.reason = "result_refused", reason
            entry.tokens["result"] = 0
            raise RpcError(jsonrpc.RESULT_TOO_LARGE, reason,
                           {"reason": reason, "decision": "result_refused", "limit": limit,
                            "tokens": cut.tokens_before})
        entry.flags.append("truncated")
        entry.result_digests = forwarded_digests(result_texts(cut.result))
        s, n = self.labels(entry.server, entry.name, "tools/call")
        self.metrics.truncated_tokens.labels(s, n, p.tenant).inc(
            cut.tokens_before - cut.tokens_after)
        return cut.result

    def screen(self, p: Principal, texts: list[str], entry: McpAuditEntry) -> None:
        """The injection screen of the result's texts with the caller's policy: a block
        raises RpcError, a flag marks the record."""
        if self.guards is None or not texts:
            return
        policy = self.guards.for_principal(p.tenant, p.app).injection
        if policy is None:
            return
        try:
            found = screen(((t, "tool") for t in texts), self.guards.detector, policy)
        except InjectionBlocked as exc:
            reason = (f"the result of {entry.server}__{entry.name} was withheld: it looks "
                      f"like a prompt injection (score {exc.verdict.score:.2f})")
            entry.decision, entry.reason, entry.verdict = "injection_blocked", reason, "block"
            entry.verdicts = {"injection": {"score": exc.verdict.score,
                                            "labels": list(exc.verdict.labels)}}
            raise RpcError(jsonrpc.DENIED, reason, {"reason": reason,
                                                    "decision": "injection_blocked"}) from None
        if found.action is not InjectionAction.NONE:
            entry.verdicts = {"injection": {"score": found.verdict.score,
                                            "action": str(found.action)}}
            if found.action is InjectionAction.FLAG:
                entry.flags.append("injection")
                entry.verdict = "flag"
