"""What to do with an injection verdict: log, flag or block, by threshold."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from tokenplane.governance.errors import PolicyViolation
from tokenplane.governance.injection.detector import InjectionDetector, Source, Verdict


class InjectionAction(StrEnum):
    NONE = "none"
    LOG = "log"
    FLAG = "flag"  # header + ledger field, request proceeds
    BLOCK = "block"


class InjectionBlocked(PolicyViolation):
    """A 400 saying the request looks like a prompt injection (labels, no content);
    ``what``: the part of it that does (a document), when not the messages."""

    def __init__(self, verdict: Verdict, what: str | None = None) -> None:
        self.verdict = verdict
        super().__init__(
            400,
            "request blocked by prompt-injection screen ("
            + (f"{what}: " if what else "")
            + (", ".join(verdict.labels) or "suspicious content")
            + f", score {verdict.score:.2f})",
            code="prompt_injection_blocked",
        )


def check_thresholds(log_at: float, flag_at: float, block_at: float) -> None:
    if not 0.0 <= log_at <= flag_at <= block_at <= 1.0:
        raise ValueError("thresholds must satisfy 0 <= log_at <= flag_at <= block_at <= 1")


@dataclass(frozen=True)
class InjectionPolicy:
    """Scores at or above ``flag_at`` are flagged, at or above ``block_at`` blocked
    (when ``mode`` is ``block``); ``mode`` ``log`` only records; ``flag`` never blocks."""

    mode: InjectionAction = InjectionAction.FLAG
    log_at: float = 0.3
    flag_at: float = 0.5
    block_at: float = 0.8

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", InjectionAction(self.mode))
        check_thresholds(self.log_at, self.flag_at, self.block_at)

    @property
    def ignores_clean(self) -> bool:
        """True when a verdict of score 0 without labels leads to no action."""
        return self.decide(Verdict(0.0)) is InjectionAction.NONE

    def decide(self, verdict: Verdict) -> InjectionAction:
        s = verdict.score
        if self.mode is InjectionAction.NONE or s < self.log_at:
            return InjectionAction.NONE
        if self.mode is InjectionAction.BLOCK and s >= self.block_at:
            return InjectionAction.BLOCK
        if self.mode in (InjectionAction.BLOCK, InjectionAction.FLAG) and s >= self.flag_at:
            return InjectionAction.FLAG
        return InjectionAction.LOG


@dataclass(frozen=True)
class ScreenResult:
    verdict: Verdict
    action: InjectionAction
    source: Source | None  # where the highest-scoring text came from


def screen(
    texts: Iterable[tuple[str, Source]],
    detector: InjectionDetector,
    policy: InjectionPolicy,
) -> ScreenResult:
    """Score every (text, source) and decide on the worst. Raises InjectionBlocked."""
    return decide([(detector.score(text, source), source) for text, source in texts], policy)


def clean(verdict: Verdict) -> bool:
    """A verdict that found nothing (what :func:`decide` merges such verdicts into)."""
    return not verdict.score and not verdict.labels and not verdict.matched


def decide(scored: Iterable[tuple[Verdict, Source]], policy: InjectionPolicy) -> ScreenResult:
    """The decision on the worst of some verdicts (labels and rules of all of them).
    Raises InjectionBlocked."""
    score = 0.0
    detector_name = ""
    worst_source: Source | None = None
    labels: dict[str, None] = {}
    matched: dict[str, None] = {}
    for verdict, source in scored:
        if verdict.labels:
            labels.update(dict.fromkeys(verdict.labels))
        if verdict.matched:
            matched.update(dict.fromkeys(verdict.matched))
        if verdict.score > score:
            score, detector_name, worst_source = verdict.score, verdict.detector, source
    merged = Verdict(score, tuple(labels), tuple(matched), detector_name)
    action = policy.decide(merged)
    if action is InjectionAction.BLOCK:
        raise InjectionBlocked(merged)
    return ScreenResult(merged, action, worst_source)
