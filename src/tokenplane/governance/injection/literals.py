"""Literal strings that every match of a regular expression must contain.

Used as a cheap prefilter: when none of a rule's required literals occurs in the
text (``str.__contains__`` runs in C without regex backtracking), the rule cannot
match and its regex is skipped.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from typing import Any

MIN_USEFUL = 2  # shorter literals filter nothing


def required_literals(pattern: str, flags: int = 0) -> frozenset[str] | None:
    """A set of strings of which every match contains at least one, or None."""
    parser: Any = importlib.import_module("re._parser")
    found = _sequence(parser.parse(pattern, flags))
    if found is None or min(len(s) for s in found) < MIN_USEFUL:
        return None
    return found


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """The more selective candidate: longer shortest string, then fewer strings."""
    if a is None:
        return b
    if b is None:
        return a
    ka = (min(len(s) for s in a), -len(a))
    kb = (min(len(s) for s in b), -len(b))
    return b if kb > ka else a


def _sequence(items: Iterable[tuple[Any, Any]]) -> frozenset[str] | None:
    best: frozenset[str] | None = None
    run: list[str] = []
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            run.append(chr(av))
            continue
        if run:
            best = _better(best, frozenset({"".join(run)}))
            run = []
        best = _better(best, _node(name, av))
    if run:
        best = _better(best, frozenset({"".join(run)}))
    return best


def _node(name: str, av: Any) -> frozenset[str] | None:
    if name == "SUBPATTERN":
        return _sequence(av[3])
    if name == "BRANCH":
        union: set[str] = set()
        for alternative in av[1]:
            found = _sequence(alternative)
            if found is None:
                return None
            union |= found
        return frozenset(union)
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, _high, item = av
        return _sequence(item) if low >= 1 else None
    return None


def any_of(literals: Iterable[str]) -> re.Pattern[str]:
    """A regular expression that matches where any of ``literals`` occurs (written as
    a trie, so each position costs one test per character class, not per literal).
    A literal inside another one stands for both: the longer one is left out."""
    words = sorted(set(literals))
    if "" in words:
        return re.compile("")
    words = [w for w in words if not any(o != w and o in w for o in words)]
    return re.compile(_trie(words) or "(?!)")


def _trie(words: list[str]) -> str:
    by_first: dict[str, list[str]] = {}
    for w in words:
        by_first.setdefault(w[0], []).append(w[1:])
    alternatives: list[str] = []
    for first, rests in by_first.items():
        head = re.escape(first)
        if "" in rests:  # the literal ends here: any longer one contains it
            alternatives.append(head)
        elif len(rests) == 1:
            alternatives.append(head + re.escape(rests[0]))
        else:
            alternatives.append(head + "(?:" + _trie(rests) + ")")
    return "|".join(alternatives)
