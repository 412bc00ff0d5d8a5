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

    Overlapping spans of the same entity type are first merged into one (their
    union, with the best score). Returns spans ordered by start position.
    """
    ranked = sorted(
        _merge_same_type([s for s in spans if s.score >= min_score]),
        key=lambda s: (-s.score, -s.length, s.start),
    )
    kept: list[Span] = []
    for span in ranked:
        if not any(span.overlaps(k) for k in kept):
            kept.append(span)
    kept.sort(key=lambda s: s.start)
    return kept


def _merge_same_type(spans: list[Span]) -> list[Span]:
    if len(spans) < 2:
        return spans
    spans = sorted(spans, key=lambda s: (s.entity_type, s.start))
    merged: list[Span] = [spans[0]]
    for s in spans[1:]:
        last = merged[-1]
        if s.entity_type == last.entity_type and s.start < last.end:
            best = s if s.score > last.score else last
            merged[-1] = Span(
                last.start, max(last.end, s.end), s.entity_type, best.score, best.recognizer
            )
        else:
            merged.append(s)
    return merged
