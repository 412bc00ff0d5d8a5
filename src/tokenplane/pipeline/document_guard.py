"""The governance policy on RAG documents around the packer (the shell of
``governance/document_guard.py``), for the context stage and ``POST
/v1/context/pack``: the caller's policy, the request's guard state (made here when the
documents need it; the input guard keeps it), the screen before packing, the packer
run on the documents kept, its result told as a pack of all of them
(``context/screened.py``: left-out documents dropped with reason ``injection``), the
screen of the documents packed (a policy that only flags or logs), and the metric
``tokenplane_injection_verdicts{source="documents"}``.
"""

from __future__ import annotations

from collections.abc import Callable

from tokenplane.context.documents import Document, Packed
from tokenplane.context.screened import screened_documents, with_left_out
from tokenplane.governance.document_guard import (
    ScreenedDocuments,
    guard_documents,
    guards_documents,
    screen_kept,
)
from tokenplane.governance.guard_policy import GuardPolicies, GuardPolicy
from tokenplane.governance.guard_state import INJECTION_FLAG, INJECTION_HEADER, GuardState
from tokenplane.observe.metrics import GatewayMetrics
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.guard_stages import check_model


class DocumentGuard:
    def __init__(self, policies: GuardPolicies, metrics: GatewayMetrics | None = None) -> None:
        self.policies = policies
        self.metrics = metrics

    def policy(self, tenant: str, app: str | None) -> GuardPolicy:
        return self.policies.for_principal(tenant, app)

    def prepare(self, ctx: RequestContext) -> GuardState | None:
        """The request's guard state when its documents are to be screened (None:
        nothing to do). The app's model list is checked first, as the input guard
        checks it first."""
        p = ctx.principal
        if p is None:
            return None
        pol = self.policy(p.tenant, p.app)
        check_model(ctx.alias, pol)
        if not guards_documents(pol):
            return None
        if ctx.guard is None:
            ctx.guard = GuardState(pol)
        return ctx.guard

    def pack(self, tenant: str, state: GuardState, documents: list[Document], param: str,
             pack: Callable[[list[Document]], Packed], count: Callable[[str], int],
             pii: bool = True) -> tuple[Packed, ScreenedDocuments]:
        """Screens ``documents`` (``param``: the field that holds them; ``pii``: apply
        the prompt's PII rules that rewrite), packs the ones kept with ``pack``, screens
        those packed when the policy only flags or logs, and returns the pack of all of
        them. Raises the policy's refusals."""
        policy, policies = state.policy, self.policies
        detector, analyzer = policies.document_detector, policies.analyzer
        try:
            screened = guard_documents([(d.id, d.text) for d in documents], policy,
                                       detector, analyzer, state, param, pii)
            packed = pack(screened_documents(documents, screened.texts, screened.positions))
            if screened.dropped:
                packed = with_left_out(packed, screened.positions,
                                       [(i, documents[i]) for i in screened.dropped],
                                       "injection", count)
            screened = screen_kept(screened, [k.index for k in packed.kept],
                                   [d.id for d in documents], policy, detector, analyzer,
                                   state)
        finally:
            self._count(tenant, state)
        return packed, screened

    def note(self, ctx: RequestContext, screened: ScreenedDocuments,
             message: object | None) -> None:
        """A flagged document flags the request (header, ledger flag); ``message``: the
        context message the documents became (when their PII rules were applied, the
        input guard leaves it alone)."""
        if screened.flagged:
            ctx.response_headers[INJECTION_HEADER] = "flagged"
            if INJECTION_FLAG not in ctx.flags:
                ctx.flags.append(INJECTION_FLAG)
        if ctx.guard is not None and screened.pii_applied:
            ctx.guard.screened_message = message

    def _count(self, tenant: str, state: GuardState) -> None:
        found = state.verdicts.get("documents")
        if self.metrics is None or not found:
            return
        counter = self.metrics.injection_verdicts
        for v in found:
            counter.labels("documents", v["action"], tenant).inc()
