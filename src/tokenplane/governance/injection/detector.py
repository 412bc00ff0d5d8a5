"""Injection detectors: the protocol, the heuristic one and a composite of several."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from tokenplane.governance.injection.literals import any_of
from tokenplane.governance.injection.normalize import normalize, plain_ascii
from tokenplane.governance.injection.rules import (
    ALL_RULES,
    EXFILTRATION,
    EXTRACTION,
    HIDDEN,
    INDIRECT,
    OVERRIDE,
    Rule,
)

Source = Literal["user", "system", "context", "tool"]

INDIRECT_SOURCES: frozenset[str] = frozenset({"context", "tool"})
# Labels whose weight rises in documents and tool output: instructions have no
# business there. Role-play words are more often mentions, so they do not rise.
BOOSTED_LABELS: frozenset[str] = frozenset({OVERRIDE, INDIRECT, EXFILTRATION, EXTRACTION, HIDDEN})

# Quoted passages: a user quoting an attack phrase to ask about it is not issuing it.
_QUOTED_RE = re.compile(
    r'"[^"\n]{3,200}"|“[^”\n]{3,200}”|「[^」\n]{3,200}」|‘[^’\n]{3,200}’|『[^』\n]{3,200}』'
    r"|(?<![a-z])'[^'\n]{3,200}'(?![a-z])"
)
# In documents and tool output a quote counts as a mention only next to a cue word
# (JSON strings are quoted too, and must not hide instructions).
_CUE_BEFORE_RE = re.compile(
    r"(?:like|such as|e\.g\.|for example|example|phrase|phrases|called|means?|"
    r"(?:tell|told|telling|ask|asked|asking)\s+(?:\w+\s+){0,3}to|例如|比如|类似|诸如|像|所谓|嵌入)\W{0,3}$"
)
_CUE_AFTER_RE = re.compile(r"^\W{0,2}(?:等|之类|这样的|这类|such)")


@dataclass(frozen=True, slots=True)
class Verdict:
    """A score in [0, 1], the categories seen and the ids of the rules that matched."""

    score: float
    labels: tuple[str, ...] = ()
    matched: tuple[str, ...] = ()
    detector: str = ""


@runtime_checkable
class InjectionDetector(Protocol):
    """Scores one text; a model-based classifier implements the same method."""

    def score(self, text: str, source: Source = "user") -> Verdict: ...


def _combine(weights: Iterable[float]) -> float:
    miss = 1.0
    for w in weights:
        miss *= 1.0 - min(max(w, 0.0), 1.0)
    return 1.0 - miss


@dataclass
class HeuristicDetector:
    """Rule-based screen in English and Chinese over normalised text.

    Each matching rule contributes its weight (noisy-or). Text from RAG context
    or tool results gets ``indirect_boost`` on every weight, since instructions
    have no business there. Invisible or hidden characters and decoded base64
    payloads are scanned too; hiding instructions adds ``hidden_weight``.
    """

    rules: Sequence[Rule] = ALL_RULES
    indirect_boost: float = 1.25
    hidden_weight: float = 0.5
    invisible_weight: float = 0.2
    quoted_factor: float = 0.4
    prefilter: bool = True  # skip rules none of whose required literals occur
    name: str = "heuristic"

    def __post_init__(self) -> None:
        # Every rule's required literals, tested once per text (a set comprehension of
        # C-level substring tests) instead of once per rule.
        self._literals = tuple(
            sorted({lit for r in self.rules if r.literals for lit in r.literals})
        )
        # ... indexed by first character: only the literals starting with a character
        # of the text are looked for (a few dozen instead of every one).
        by_first: dict[str, list[str]] = {}
        for lit in self._literals:
            by_first.setdefault(lit[0], []).append(lit)
        self._by_first = {c: tuple(lits) for c, lits in by_first.items()}
        # the rules each literal can let through, and those with no prefilter
        rules_of: dict[str, list[int]] = {}
        for i, rule in enumerate(self.rules):
            for lit in rule.literals or ():
                rules_of.setdefault(lit, []).append(i)
        self._rules_of = {lit: tuple(ids) for lit, ids in rules_of.items()}
        self._unfiltered = tuple(i for i, r in enumerate(self.rules) if r.literals is None)
        # One search that finds whether any required literal occurs at all (most texts
        # hold none): [indirect][ascii] -> the literals of the rules that can apply,
        # ASCII ones only for ASCII text (no other literal can occur in it).
        self._any = tuple(
            tuple(any_of(lit for r in self.rules if r.literals
                         and (indirect or not r.indirect_only)
                         for lit in r.literals if ascii_only <= lit.isascii())
                  for ascii_only in (False, True))
            for indirect in (False, True))
        self._nothing = Verdict(0.0, detector=self.name)  # immutable: shared

    def score(self, text: str, source: Source = "user") -> Verdict:
        indirect = source in INDIRECT_SOURCES
        if self.prefilter and not self._unfiltered:
            # ASCII prose that normalises to itself lower-cased, without any literal a
            # rule needs: nothing to find (the common case, in a few C-level scans)
            folded = plain_ascii(text)
            if folded is not None and self._any[indirect][True].search(folded) is None:
                return self._nothing
        norm = normalize(text)
        hits = self._matching(norm.text, indirect)
        if not hits and not norm.hidden and not norm.decoded and not norm.signals:
            return self._nothing  # nothing matched, nothing hidden
        boost = self.indirect_boost if indirect else 1.0
        weights: list[float] = []
        labels: list[str] = []
        matched: list[str] = []
        quoted = _mentions(norm.text, indirect) if hits else []
        for rule, start in hits:
            inside = any(lo < start < hi for lo, hi in quoted)
            factor = boost if rule.label in BOOSTED_LABELS else 1.0
            weights.append(rule.weight * factor * (self.quoted_factor if inside else 1.0))
            labels.append(rule.label)
            matched.append(rule.id)
        for payload in norm.hidden + norm.decoded:
            found = [r for r, _ in self._matching(payload, True)]
            if found:
                weights.append(self.hidden_weight)
                weights.extend(r.weight * boost for r in found)
                labels.extend([HIDDEN, *(r.label for r in found)])
                matched.extend(f"hidden:{r.id}" for r in found)
        if norm.signals:
            labels.append(HIDDEN)
            matched.extend(f"signal:{s}" for s in dict.fromkeys(norm.signals))
            if weights:
                weights.append(self.invisible_weight)
        return Verdict(
            score=round(_combine(weights), 4),
            labels=tuple(dict.fromkeys(labels)),
            matched=tuple(dict.fromkeys(matched)),
            detector=self.name,
        )

    def _present(self, text: str) -> set[str]:
        """The required literals that occur in ``text``."""
        by_first = self._by_first
        return {lit for c in set(text) if c in by_first for lit in by_first[c] if lit in text}

    def _candidates(self, text: str) -> list[int]:
        """The rules without a prefilter and those one of whose literals occurs."""
        ids = set(self._unfiltered)
        for lit in self._present(text):
            ids.update(self._rules_of[lit])
        return sorted(ids)

    def _matching(self, text: str, indirect: bool) -> list[tuple[Rule, int]]:
        hits: list[tuple[Rule, int]] = []
        rules = self.rules
        if self.prefilter:  # only rules one of whose required literals occurs
            if self._any[indirect][text.isascii()].search(text) is None:
                order: Iterable[int] = self._unfiltered  # no literal occurs at all
                if not order:
                    return hits
            else:
                order = self._candidates(text)
        else:
            order = range(len(rules))
        for i in order:
            rule = rules[i]
            if rule.indirect_only and not indirect:
                continue
            m = rule.pattern.search(text)
            if m is not None:
                hits.append((rule, m.start()))
        return hits


def _mentions(text: str, indirect: bool) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for m in _QUOTED_RE.finditer(text):
        lo, hi = m.span()
        if not indirect or (
            _CUE_BEFORE_RE.search(text[max(0, lo - 40) : lo]) or _CUE_AFTER_RE.match(text[hi:])
        ):
            spans.append((lo, hi))
    return spans


@dataclass
class CompositeDetector:
    """Runs several detectors; the score is the maximum (or a weighted mean)."""

    detectors: Sequence[InjectionDetector]
    weights: Sequence[float] | None = None
    mode: Literal["max", "mean"] = "max"

    def score(self, text: str, source: Source = "user") -> Verdict:
        verdicts = [d.score(text, source) for d in self.detectors]
        if not verdicts:
            return Verdict(0.0, detector="composite")
        if self.mode == "max":
            value = max(v.score for v in verdicts)
        else:
            ws = list(self.weights or [1.0] * len(verdicts))
            value = sum(w * v.score for w, v in zip(ws, verdicts, strict=True)) / sum(ws)
        labels = tuple(dict.fromkeys(label for v in verdicts for label in v.labels))
        matched = tuple(dict.fromkeys(m for v in verdicts for m in v.matched))
        return Verdict(round(value, 4), labels, matched, "composite")
