"""The governance policy of one (tenant, app), resolved once from configuration.

Built objects (one shared :class:`Analyzer`, one injection detector) are reused by
every request; a principal's policy is computed on first use and cached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenplane.config.governance_schema import (
    GovernanceConfig,
    InjectionConfig,
    PiiRules,
    ToolsConfig,
)
from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.analyzer_cache import CachedAnalyzer
from tokenplane.governance.injection.cached import CachedDetector
from tokenplane.governance.injection.detector import HeuristicDetector, InjectionDetector
from tokenplane.governance.injection.documents import DocumentAction, DocumentPolicy
from tokenplane.governance.injection.screen import InjectionAction, InjectionPolicy
from tokenplane.governance.pii_policy import PiiPolicy
from tokenplane.governance.tools import ToolPolicy


@dataclass(frozen=True)
class GuardPolicy:
    """What the guards do for one principal. A ``None`` PII policy means nothing to
    scan (every type allowed); ``response_rewrites`` says whether streamed output
    must be parsed and rewritten for the response policy; ``injection_quiet`` that
    the injection policy does nothing when the screen finds nothing; ``documents``:
    what the screen does with each RAG document (None: they are not screened)."""

    prompt: PiiPolicy | None
    tool_results: PiiPolicy | None
    response: PiiPolicy | None
    response_rewrites: bool
    injection: InjectionPolicy | None
    tools: ToolPolicy
    max_context_tokens: int | None = None
    max_output_tokens: int | None = None
    models: frozenset[str] | None = None
    injection_quiet: bool = True
    documents: DocumentPolicy | None = None


@dataclass
class _Resolved:
    prompt: PiiRules
    tool_results: PiiRules | None
    response: PiiRules
    injection: InjectionConfig
    tools: ToolsConfig
    max_context_tokens: int | None
    max_output_tokens: int | None
    models: list[str] | None = None


@dataclass
class GuardPolicies:
    """Resolves and caches :class:`GuardPolicy` per (tenant, app). ``detector``
    screens messages; ``document_detector`` (the same, remembering its verdicts)
    screens RAG documents, which recur."""

    config: GovernanceConfig
    detector: InjectionDetector = field(default_factory=HeuristicDetector)
    analyzer: Analyzer = field(init=False)
    document_detector: InjectionDetector = field(init=False)
    _cache: dict[tuple[str, str | None], GuardPolicy] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.analyzer = CachedAnalyzer(Analyzer.from_config(self.config.pii.analyzer))
        self.document_detector = CachedDetector(self.detector)

    def for_principal(self, tenant: str, app: str | None) -> GuardPolicy:
        key = (tenant, app)
        pol = self._cache.get(key)
        if pol is None:
            pol = self._build(self._resolve(tenant, app))
            self._cache[key] = pol
        return pol

    def _resolve(self, tenant: str, app: str | None) -> _Resolved:
        c = self.config
        r = _Resolved(c.pii.prompt, c.pii.tool_results, c.pii.response, c.injection, c.tools,
                      c.max_context_tokens, c.max_output_tokens)
        layers = [o for o in c.overrides if o.tenant == tenant and o.app is None]
        if app is not None:
            layers += [o for o in c.overrides if o.tenant == tenant and o.app == app]
        for o in layers:
            if o.pii is not None:
                r.prompt = o.pii.prompt or r.prompt
                r.tool_results = o.pii.tool_results or r.tool_results
                r.response = o.pii.response or r.response
            r.injection = o.injection or r.injection
            r.tools = o.tools or r.tools
            r.max_context_tokens = o.max_context_tokens or r.max_context_tokens
            r.max_output_tokens = o.max_output_tokens or r.max_output_tokens
            r.models = o.models if o.models is not None else r.models
        return r

    def _pii(self, rules: PiiRules) -> PiiPolicy | None:
        if not rules.needs_scan():
            return None
        spec: dict[str, Any] = {"default": rules.default, "actions": rules.actions}
        return PiiPolicy.from_config(spec, analyzer=self.analyzer)

    def _build(self, r: _Resolved) -> GuardPolicy:
        inj = r.injection
        injection = None if inj.mode == "none" else InjectionPolicy(
            InjectionAction(inj.mode), inj.log_at, inj.flag_at, inj.block_at)
        doc_mode = inj.documents or inj.mode
        documents = None if doc_mode == "none" else DocumentPolicy(
            DocumentAction(doc_mode), inj.log_at, inj.flag_at, inj.block_at)
        return GuardPolicy(
            prompt=self._pii(r.prompt),
            tool_results=self._pii(r.tool_results or r.prompt),
            response=self._pii(r.response),
            response_rewrites=r.response.rewrites(),
            injection=injection,
            tools=ToolPolicy.of(r.tools.allowed, r.tools.mode),
            max_context_tokens=r.max_context_tokens,
            max_output_tokens=r.max_output_tokens,
            models=frozenset(r.models) if r.models is not None else None,
            injection_quiet=injection is None or injection.ignores_clean,
            documents=documents,
        )
