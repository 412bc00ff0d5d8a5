"""The governance policy applied to a request's RAG documents before they are packed
(docs/GOVERNANCE.md, "Retrieved documents"): each is screened for indirect prompt
injection (``injection/documents.py``), a document the policy drops is left out and
one it blocks refuses the request; the documents kept get the prompt's PII rules
(mask, tokenize into the request's vault, block), as the message they become would.
Verdicts go on the request's :class:`GuardState`: ``verdicts["documents"]`` (each
document acted on: index, id redacted, action, score, labels) and
``verdicts["pii"]["documents"]`` (entity type -> action -> count)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.guard_policy import GuardPolicy
from tokenplane.governance.guard_state import GuardState
from tokenplane.governance.injection.detector import InjectionDetector
from tokenplane.governance.injection.documents import (
    DocumentAction,
    DocumentInjectionBlocked,
    DocumentVerdict,
    screen_documents,
)
from tokenplane.governance.pii_policy import PiiBlocked, PiiPolicy, apply, redact


@dataclass(frozen=True, slots=True)
class ScreenedDocuments:
    """``texts``: the documents to pack, in request order, as the PII rules left
    them, and ``positions`` each one's index in the request; ``dropped``: the
    indices the injection screen left out; ``verdicts``: the documents it acted on."""

    texts: list[str]
    positions: list[int]
    dropped: list[int]
    verdicts: list[DocumentVerdict]

    @property
    def flagged(self) -> bool:
        """A document was kept with an injection flag (the request is flagged)."""
        return any(v.action is DocumentAction.FLAG for v in self.verdicts)


def guards_documents(policy: GuardPolicy, pii: bool = True) -> bool:
    """Whether :func:`guard_documents` has anything to do under ``policy``."""
    return policy.documents is not None or (pii and policy.prompt is not None)


def guard_documents(documents: Sequence[tuple[str, str]], policy: GuardPolicy,
                    detector: InjectionDetector, analyzer: Analyzer, state: GuardState,
                    param: str, pii: bool = True) -> ScreenedDocuments:
    """Screens ``(id, text)`` documents; ``param``: the field holding them (a refusal
    names ``param[i]``); ``pii``: apply the prompt's PII rules to the documents kept.
    Raises :class:`DocumentInjectionBlocked` or :class:`PiiBlocked`."""
    verdicts: list[DocumentVerdict] = []
    if policy.documents is not None:
        verdicts = screen_documents(documents, detector, policy.documents)
    if verdicts:
        _note(state, verdicts, analyzer)
        blocked = next((v for v in verdicts if v.action is DocumentAction.BLOCK), None)
        if blocked is not None:
            raise DocumentInjectionBlocked(blocked, f"{param}[{blocked.index}]")
    out = {v.index for v in verdicts if v.action in (DocumentAction.DROP, DocumentAction.BLOCK)}
    positions = [i for i in range(len(documents)) if i not in out]
    texts = [documents[i][1] for i in positions]
    rules = policy.prompt if pii else None
    if rules is not None:
        texts = _pii(texts, rules, state)
    return ScreenedDocuments(texts, positions, sorted(out), verdicts)


def _note(state: GuardState, verdicts: list[DocumentVerdict], analyzer: Analyzer) -> None:
    state.verdicts["documents"] = [
        {"index": v.index, "id": redact(v.id, analyzer), "action": v.action.value,
         "score": round(v.verdict.score, 3), "labels": list(v.verdict.labels)}
        for v in verdicts]
    if any(v.action in (DocumentAction.FLAG, DocumentAction.DROP) for v in verdicts):
        state.flagged = True  # the audit verdict "flag"


def _pii(texts: list[str], rules: PiiPolicy, state: GuardState) -> list[str]:
    """The texts with the rules applied (a clean one as it is); every blocked entity
    type of every document in one refusal."""
    out: list[str] = []
    blocked: list[str] = []
    nothing_in = rules.analyzer.nothing_in
    for text in texts:
        if nothing_in(text):
            state.note_pii("documents")
            out.append(text)
            continue
        try:
            new, found = apply(text, rules, state.vault)
        except PiiBlocked as exc:
            blocked.extend(exc.entity_types)
            out.append(text)
            continue
        state.note_pii("documents", found)
        out.append(new)
    if blocked:
        state.note_blocked("documents", sorted(set(blocked)))
        raise PiiBlocked(blocked)
    return out
