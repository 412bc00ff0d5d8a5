"""Indirect prompt injection through retrieved documents (the RAG case; Azure Prompt
Shields calls it a "document attack"): each document is scored on its own, as text of
source ``context``, and the policy says what to do with it: keep it and log, keep it
and flag the request, drop it before it is packed, or refuse the request.

A document is not a message: it can be left out without changing what the user
asked, so ``drop`` is the action a RAG application usually wants, and in ``block``
mode a document scoring between ``flag_at`` and ``block_at`` is dropped rather than
merely flagged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from tokenplane.governance.injection.detector import InjectionDetector, Verdict
from tokenplane.governance.injection.screen import InjectionBlocked, check_thresholds


class DocumentAction(StrEnum):
    NONE = "none"
    LOG = "log"  # recorded in the audit verdicts
    FLAG = "flag"  # kept; the request is flagged (header, ledger flag)
    DROP = "drop"  # left out of the packed context (reason ``injection``)
    BLOCK = "block"  # the request is refused (400 prompt_injection_blocked)


@dataclass(frozen=True)
class DocumentPolicy:
    """Scores below ``log_at`` pass unrecorded. ``log``: recorded from ``log_at``;
    ``flag``: flagged from ``flag_at``; ``drop``: dropped from ``flag_at``; ``block``:
    dropped from ``flag_at``, refused from ``block_at``."""

    mode: DocumentAction = DocumentAction.DROP
    log_at: float = 0.3
    flag_at: float = 0.5
    block_at: float = 0.8

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", DocumentAction(self.mode))
        check_thresholds(self.log_at, self.flag_at, self.block_at)

    @property
    def before_packing(self) -> bool:
        """Whether the policy can change what is packed (``drop``, ``block``): then
        every document offered is screened before packing; otherwise (``log``,
        ``flag``) only the documents packed, since the others are never sent."""
        return self.mode in (DocumentAction.DROP, DocumentAction.BLOCK)

    def decide(self, verdict: Verdict) -> DocumentAction:
        s, mode = verdict.score, self.mode
        if mode is DocumentAction.NONE or s < self.log_at:
            return DocumentAction.NONE
        if mode is DocumentAction.BLOCK and s >= self.block_at:
            return DocumentAction.BLOCK
        if s >= self.flag_at and mode is not DocumentAction.LOG:
            return DocumentAction.FLAG if mode is DocumentAction.FLAG else DocumentAction.DROP
        return DocumentAction.LOG


@dataclass(frozen=True, slots=True)
class DocumentVerdict:
    """The screen's verdict on the document at ``index`` (its position in the request)
    and what the policy does with it."""

    index: int
    id: str
    action: DocumentAction
    verdict: Verdict


class DocumentInjectionBlocked(InjectionBlocked):
    """A 400 naming the document (its id and ``param``, the field that holds it) and
    the screen's labels and score, never its content."""

    def __init__(self, found: DocumentVerdict, param: str) -> None:
        super().__init__(found.verdict, what=f"document {found.id!r}")
        self.param = param


def screen_documents(documents: Sequence[tuple[str, str]], detector: InjectionDetector,
                     policy: DocumentPolicy) -> list[DocumentVerdict]:
    """Scores each ``(id, text)`` as retrieved context; the verdicts of the documents
    the policy acts on (log and up), in request order. Raises nothing: the caller
    records them, then refuses on the first ``block``."""
    out: list[DocumentVerdict] = []
    for i, (doc_id, text) in enumerate(documents):
        verdict = detector.score(text, "context")
        action = policy.decide(verdict)
        if action is not DocumentAction.NONE:
            out.append(DocumentVerdict(i, doc_id, action, verdict))
    return out
