"""Characters a recognizer's every match must contain: a cheap test before scanning.

Most PII patterns cannot match a text without a digit (phone numbers, identity and
card numbers, IP addresses) or without a particular sign (``@``). From a pattern's
parse tree, :func:`required_need` finds a mandatory element whose characters all lie in
a small set (Unicode decimal digits and/or a few listed characters). The analyzer
tests each distinct set once per text (one C-level search) and skips the recognizers
whose set is absent: they would have found nothing, so results are unchanged.

:func:`min_digits` counts the decimal digits every match contains (an identity card
number has 18, a phone number at least 7): a text with fewer digits in all is skipped
too.

Case-insensitive patterns (``IGNORECASE``, or run on ``text.lower()``) only get sets of
characters that have no case (digits, ASCII signs).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import Any

MAX_CHARS = 64  # larger sets filter too little to be worth a search


@dataclass(frozen=True, slots=True)
class Need:
    """``digit``: any Unicode decimal digit will do; ``chars``: or one of these."""

    digit: bool
    chars: frozenset[str]

    @property
    def rank(self) -> tuple[bool, int]:
        """Lower is more selective: sets with letters, spaces or common signs last."""
        common = any(c.isalpha() or c.isspace() or c in ".,-" for c in self.chars)
        return common, len(self.chars) + (10 if self.digit else 0)

    def regex(self) -> re.Pattern[str]:
        listed = "".join(re.escape(c) for c in sorted(self.chars))
        return re.compile("[" + ("\\d" if self.digit else "") + listed + "]")


def required_need(pattern: re.Pattern[str], lowered: bool = False) -> Need | None:
    """A :class:`Need` every match of ``pattern`` satisfies, or None.

    ``lowered``: the pattern runs on ``text.lower()`` (so only caseless characters
    may be required of ``text``)."""
    parser: Any = importlib.import_module("re._parser")
    try:
        tree = parser.parse(pattern.pattern, pattern.flags)
    except re.error:
        return None
    ci = lowered or bool(pattern.flags & re.IGNORECASE)
    return _sequence(list(tree), ci)


def _caseless(c: str) -> bool:
    return c.isascii() and not c.isalpha()


def _best(a: Need | None, b: Need | None) -> Need | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b.rank < a.rank else a


def _sequence(items: list[tuple[Any, Any]], ci: bool) -> Need | None:
    best: Need | None = None
    for op, av in items:
        best = _best(best, _node(str(op), av, ci))
    return best


def _char_need(chars: set[str], digit: bool, ci: bool) -> Need | None:
    """Decimal digits widen to "any digit", so that most recognizers share one test."""
    if any(c.isdecimal() for c in chars):
        digit = True
        chars = {c for c in chars if not c.isdecimal()}
    if ci and not all(_caseless(c) for c in chars):
        return None
    return Need(digit, frozenset(chars)) if len(chars) <= MAX_CHARS else None


def _node(name: str, av: Any, ci: bool) -> Need | None:
    if name == "LITERAL":
        return _char_need({chr(av)}, False, ci)
    if name == "IN":
        return _class(av, ci)
    if name == "SUBPATTERN":
        add_flags = av[1] or 0
        return _sequence(list(av[3]), ci or bool(add_flags & re.IGNORECASE))
    if name == "ATOMIC_GROUP":
        return _sequence(list(av), ci)
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, _high, item = av
        return _sequence(list(item), ci) if low >= 1 else None
    if name == "BRANCH":
        union: Need | None = None
        for alternative in av[1]:
            found = _sequence(list(alternative), ci)
            if found is None:
                return None
            union = found if union is None else Need(union.digit or found.digit,
                                                     union.chars | found.chars)
        if union is None or len(union.chars) > MAX_CHARS:
            return None
        return union
    return None


def _class(items: list[tuple[Any, Any]], ci: bool) -> Need | None:
    chars: set[str] = set()
    digit = False
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            chars.add(chr(av))
        elif name == "RANGE":
            lo, hi = av
            if hi - lo >= MAX_CHARS:
                return None
            chars.update(chr(x) for x in range(lo, hi + 1))
        elif name == "CATEGORY" and str(av) == "CATEGORY_DIGIT":
            digit = True
        else:  # NEGATE, other categories: too wide
            return None
    return _char_need(chars, digit, ci)


def min_digits(pattern: re.Pattern[str]) -> int:
    """How many decimal digits every match of ``pattern`` contains (at least)."""
    parser: Any = importlib.import_module("re._parser")
    try:
        tree = parser.parse(pattern.pattern, pattern.flags)
    except re.error:
        return 0
    return _digits_in(list(tree))


def _digits_in(items: list[tuple[Any, Any]]) -> int:
    return sum(_digits_of(str(op), av) for op, av in items)


def _digits_of(name: str, av: Any) -> int:
    if name == "LITERAL":
        return 1 if chr(av).isdecimal() else 0
    if name == "IN":
        need = _class(av, False)
        return 1 if need is not None and need.digit and not need.chars else 0
    if name == "SUBPATTERN":
        return _digits_in(list(av[3]))
    if name == "ATOMIC_GROUP":
        return _digits_in(list(av))
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, _high, item = av
        return int(low) * _digits_in(list(item))
    if name == "BRANCH":
        return min(_digits_in(list(alt)) for alt in av[1])
    return 0  # lookarounds and anchors match no characters; others need no digit
