"""What to do with an injection verdict: log, flag or block, by threshold."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from tokenplane.api.errors import ApiError
from tokenplane.governance.injection.detector import InjectionDetector, Source, Verdict


class InjectionAction(StrEnum):
    NONE = "none"
    LOG = "log"
    FLAG = "flag"  # header + ledger field, request proceeds
    BLOCK = "block"


class InjectionBlocked(ApiError):
    """A 400 saying the request looks like a prompt injection (labels, no content)."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(
            400,
            "request blocked by prompt-injection screen ("
            + (", ".join(verdict.labels) or "suspicious content")
            + f", score {verdict.score:.2f})",
            code="prompt_injection_blocked",
        )


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
        if not 0.0 <= self.log_at <= self.flag_at <= self.block_at <= 1.0:
            raise ValueError("thresholds must satisfy 0 <= log_at <= flag_at <= block_at <= 1")

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
    worst = Verdict(0.0)
    worst_source: Source | None = None
    labels: dict[str, None] = {}
    matched: dict[str, None] = {}
    for text, source in texts:
        verdict = detector.score(text, source)
        labels.update(dict.fromkeys(verdict.labels))
        matched.update(dict.fromkeys(verdict.matched))
        if verdict.score > worst.score:
            worst, worst_source = verdict, source
    merged = Verdict(worst.score, tuple(labels), tuple(matched), worst.detector)
    action = policy.decide(merged)
    if action is InjectionAction.BLOCK:
        raise InjectionBlocked(merged)
    return ScreenResult(merged, action, worst_source)
