"""What a recognizer reports: a span of text, its entity type and a confidence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Span:
    """A recognised entity at ``text[start:end]`` (never carries the value itself)."""

    start: int
    end: int
    entity_type: str
    score: float
    recognizer: str

    @property
    def length(self) -> int:
        return self.end - self.start

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end


@runtime_checkable
class Recognizer(Protocol):
    """Finds entities of one or more types in a text."""

    @property
    def name(self) -> str: ...

    @property
    def entities(self) -> tuple[str, ...]: ...

    def find(self, text: str) -> list[Span]: ...


def resolve_overlaps(spans: list[Span], min_score: float = 0.0) -> list[Span]:
    """Keep non-overlapping spans, preferring the highest score, then the longest.

    Returns them ordered by start position.
    """
    ranked = sorted(
        (s for s in spans if s.score >= min_score),
        key=lambda s: (-s.score, -s.length, s.start),
    )
    kept: list[Span] = []
    for span in ranked:
        if not any(span.overlaps(k) for k in kept):
            kept.append(span)
    kept.sort(key=lambda s: s.start)
    return kept
