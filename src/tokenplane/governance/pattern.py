"""A recognizer made of a regular expression, a validator and a confidence."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tokenplane.governance.gate import Gate
from tokenplane.governance.prechecks import Need, min_digits, required_need
from tokenplane.governance.spans import Span

Validator = Callable[[str], bool]

CONTEXT_WINDOW = 40

DIGITS = "0123456789"
ALNUM = DIGITS + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


@dataclass(eq=False)
class PatternRecognizer:
    """Reports every match of ``pattern`` whose value passes ``validator``.

    ``prefilter``: literal strings of which at least one must occur in the text
    for the pattern to run at all (a cheap skip). ``context``: words that, when
    found shortly before the match (case-insensitive), raise the score to
    ``context_score``. ``group`` selects the part of the match that is reported.
    ``not_after``: characters that must not directly precede the match (checked
    here rather than with a leading look-behind, which would stop the regex
    engine from skipping ahead on the pattern's first character). ``anchors``:
    literal strings every match contains; the pattern then only runs in
    ``window`` (chars before, after) around each anchor occurrence.
    ``match_lowered``: the pattern is written in lower case and runs on
    ``text.lower()`` (values still come from ``text``): faster than IGNORECASE,
    which stops the engine from skipping ahead.

    ``gate`` (see governance/gate.py) finds every text this recognizer can report
    something in: the anchors when it has some (it scans only around them), else its
    own pattern (on the lowered text when ``match_lowered``). A subclass with its own
    ``find`` gets none.
    """

    name: str
    entity_type: str
    pattern: re.Pattern[str]
    score: float
    validator: Validator | None = None
    prefilter: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    context_score: float | None = None
    group: int | str = 0
    not_after: str = ""
    anchors: tuple[str, ...] = ()
    window: tuple[int, int] = (64, 256)
    match_lowered: bool = False
    entities: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.entities = (self.entity_type,)
        self.context = tuple(w.lower() for w in self.context)
        self._run = re.compile("[" + re.escape(self.not_after) + "]*" if self.not_after else "")
        self._ignore_case = (
            re.compile(self.pattern.pattern, self.pattern.flags | re.IGNORECASE)
            if self.match_lowered
            else self.pattern
        )
        # characters every match contains: the analyzer skips texts without them
        self.need: Need | None = required_need(self.pattern, self.match_lowered)
        self.min_digits = min_digits(self.pattern)
        self.gate: Gate | None = None
        if type(self).find is PatternRecognizer.find:
            self.gate = (Gate(re.compile("|".join(re.escape(a) for a in self.anchors)),
                              digits=self.min_digits) if self.anchors
                         else Gate(self.pattern, self.match_lowered, self.min_digits))

    def find(self, text: str) -> list[Span]:
        if self.prefilter and not any(p in text for p in self.prefilter):
            return []
        spans: list[Span] = []
        pattern, haystack = self.pattern, text
        if self.match_lowered:
            haystack = text.lower()
            if len(haystack) != len(text):  # rare: lower() changed lengths
                pattern, haystack = self._ignore_case, text
        for lo, hi in self._ranges(text):
            self._scan(pattern, haystack, text, lo, hi, spans)
        return spans

    def _ranges(self, text: str) -> list[tuple[int, int]]:
        if not self.anchors:
            return [(0, len(text))]
        before, after = self.window
        ranges: list[tuple[int, int]] = []
        for anchor in self.anchors:
            i = text.find(anchor)
            while i >= 0:
                ranges.append((max(0, i - before), min(len(text), i + len(anchor) + after)))
                i = text.find(anchor, i + len(anchor))
        ranges.sort()
        merged: list[tuple[int, int]] = []
        for lo, hi in ranges:
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
            else:
                merged.append((lo, hi))
        return merged

    def _scan(
        self,
        pattern: re.Pattern[str],
        haystack: str,
        text: str,
        lo: int,
        hi: int,
        spans: list[Span],
    ) -> None:
        not_after = self.not_after
        search = pattern.search
        pos = lo
        while pos <= hi:  # past hi, search would clamp to hi: an empty match would repeat
            m = search(haystack, pos, hi)
            if m is None:
                return
            if not_after and m.start() > 0 and text[m.start() - 1] in not_after:
                # As a look-behind would, try later starts; every start inside this
                # run of not_after characters would be rejected too, so skip the run.
                run = self._run.match(text, m.start())
                pos = (run.end() if run is not None else m.start()) + 1
                continue
            pos = m.end() if m.end() > m.start() else m.start() + 1
            start, end = m.span(self.group)
            value = text[start:end]
            if not value:
                continue
            if self.validator is not None and not self.validator(value):
                continue
            if spans and spans[-1].start == start and spans[-1].recognizer == self.name:
                continue  # the same match seen from two overlapping anchor windows
            spans.append(Span(start, end, self.entity_type, self._score(text, start), self.name))

    def _score(self, text: str, start: int) -> float:
        if self.context_score is None or not self.context:
            return self.score
        window = text[max(0, start - CONTEXT_WINDOW) : start].lower()
        if any(w in window for w in self.context):
            return max(self.score, self.context_score)
        return self.score


def compile_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compile with ASCII-only classes so \\d never matches full-width or other digits."""
    return re.compile(pattern, flags | re.ASCII)
