"""The governance policy applied to a request's RAG documents (docs/GOVERNANCE.md,
"Retrieved documents"), in two steps around the packer:

- before packing (:func:`guard_documents`), what can change what is packed: the
  injection screen of every document offered when the policy drops or blocks
  (``injection/documents.py``: a dropped document is left out, a blocked one refuses
  the request), and the prompt's PII rules when they mask or tokenize (into the
  request's vault), so the packer counts the text that is sent;
- after packing (:func:`screen_kept`), when the policy only logs or flags: the
  documents packed (the others are never sent, so there is nothing to flag).

PII rules that only log or block are left to the input guard, which scans the packed
block as it scans every message. Verdicts go on the request's :class:`GuardState`:
``verdicts["documents"]`` (each document acted on: index, id redacted, action,
score, labels) and ``verdicts["pii"]["documents"]`` (entity type -> action ->
count)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

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
    them (``pii_applied``: they were applied), and ``positions`` each one's index in
    the request; ``dropped``: the indices the injection screen left out;
    ``verdicts``: the documents it acted on."""

    texts: list[str]
    positions: list[int]
    dropped: list[int]
    verdicts: list[DocumentVerdict]
    pii_applied: bool = False

    @property
    def flagged(self) -> bool:
        """A document was sent with an injection flag (the request is flagged)."""
        return any(v.action is DocumentAction.FLAG for v in self.verdicts)


def _rewriting(policy: GuardPolicy, pii: bool) -> PiiPolicy | None:
    rules = policy.prompt if pii else None
    return rules if rules is not None and rules.rewrites else None


def guards_documents(policy: GuardPolicy, pii: bool = True) -> bool:
    """Whether the documents have anything to go through under ``policy`` (``pii``:
    the PII rules are to be applied)."""
    return policy.documents is not None or _rewriting(policy, pii) is not None


def guard_documents(documents: Sequence[tuple[str, str]], policy: GuardPolicy,
                    detector: InjectionDetector, analyzer: Analyzer, state: GuardState,
                    param: str, pii: bool = True) -> ScreenedDocuments:
    """Before packing: screens ``(id, text)`` documents when the policy drops or
    blocks (``param``: the field holding them; a refusal names ``param[i]``) and
    applies the prompt's PII rules that rewrite to those kept (``pii``). Raises
    :class:`DocumentInjectionBlocked` or :class:`PiiBlocked`."""
    verdicts: list[DocumentVerdict] = []
    if policy.documents is not None and policy.documents.before_packing:
        verdicts = screen_documents(documents, detector, policy.documents)
    if verdicts:
        _note(state, verdicts, analyzer)
        blocked = next((v for v in verdicts if v.action is DocumentAction.BLOCK), None)
        if blocked is not None:
            raise DocumentInjectionBlocked(blocked, f"{param}[{blocked.index}]")
    out = {v.index for v in verdicts if v.action is DocumentAction.DROP}
    positions = [i for i in range(len(documents)) if i not in out]
    texts = [documents[i][1] for i in positions]
    rules = _rewriting(policy, pii)
    if rules is not None:
        texts = _pii(texts, rules, state)
    return ScreenedDocuments(texts, positions, sorted(out), verdicts, rules is not None)


def screen_kept(screened: ScreenedDocuments, kept: Sequence[int], ids: Sequence[str],
                policy: GuardPolicy, detector: InjectionDetector, analyzer: Analyzer,
                state: GuardState) -> ScreenedDocuments:
    """After packing, when the policy only logs or flags: screens the documents
    packed (``kept``: their indices in the request) as they are sent."""
    docs = policy.documents
    if docs is None or docs.before_packing or not kept:
        return screened
    at = {p: j for j, p in enumerate(screened.positions)}
    order = sorted(kept)
    found = screen_documents([(ids[i], screened.texts[at[i]]) for i in order], detector, docs)
    if not found:
        return screened
    verdicts = [replace(v, index=order[v.index]) for v in found]
    _note(state, verdicts, analyzer)
    return replace(screened, verdicts=verdicts)


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
