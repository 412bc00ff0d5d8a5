"""One cheap search that proves no recognizer can match a text.

A recognizer may offer a :class:`Gate`: a regular expression that matches somewhere in
every text in which the recognizer finds anything (its own pattern, or the anchors
it scans around), searched in the text itself or, for patterns that run on
``text.lower()``, in the lowered text. :class:`TextGate` joins the gates of a set of
recognizers into a few alternations; when none of them matches a text, none of those
recognizers would have found anything in it, and the analyzer skips them all.

Each alternation is searched as ``[first](?<=(?=alternatives)[\\s\\S])``: the class of
every character a match can start with comes first, so the regex engine skips the
positions whose character is not in it without trying the alternatives (see
:func:`first_chars`). Alternatives whose first characters are unknown are searched
as a plain alternation.
"""

from __future__ import annotations

import importlib
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

# inline letters of the flags a gate keeps when it becomes one alternative
_FLAG_LETTERS = ((re.ASCII, "a"), (re.IGNORECASE, "i"), (re.MULTILINE, "m"),
                 (re.DOTALL, "s"), (re.VERBOSE, "x"))
_REFS = frozenset({"GROUPREF", "GROUPREF_EXISTS"})
_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d", "CATEGORY_NOT_DIGIT": r"\D", "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S", "CATEGORY_WORD": r"\w", "CATEGORY_NOT_WORD": r"\W",
}


@dataclass(frozen=True, slots=True)
class Gate:
    """``pattern`` matches somewhere in every text (``text.lower()`` when ``lowered``)
    in which the recognizer finds anything; such a text holds at least ``digits``
    decimal digits."""

    pattern: re.Pattern[str]
    lowered: bool = False
    digits: int = 0


def _parser() -> Any:
    return importlib.import_module("re._parser")


def alternative(pattern: re.Pattern[str]) -> str | None:
    """``pattern`` as a group that can stand in an alternation with others (its flags
    made local), or None when it cannot: back-references (their numbers would
    change) or flags that only work at the start of a whole expression."""
    letters = "".join(c for flag, c in _FLAG_LETTERS if pattern.flags & flag)
    newline = "\n" if pattern.flags & re.VERBOSE else ""  # ends a trailing comment
    source = f"(?{letters}:{pattern.pattern}{newline})"
    try:
        tree = _parser().parse(pattern.pattern, pattern.flags)
        alone = re.compile(source)
    except re.error:
        return None
    if _has_refs(list(tree)) or alone.groups != pattern.groups:
        return None
    return source


def _has_refs(items: list[tuple[Any, Any]]) -> bool:
    for op, av in items:
        if str(op) in _REFS:
            return True
        for sub in _subtrees(str(op), av):
            if _has_refs(sub):
                return True
    return False


def _subtrees(name: str, av: Any) -> list[list[tuple[Any, Any]]]:
    if name == "SUBPATTERN":
        return [list(av[3])]
    if name in ("ATOMIC_GROUP",):
        return [list(av)]
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return [list(av[2])]
    if name == "BRANCH":
        return [list(alt) for alt in av[1]]
    if name in ("ASSERT", "ASSERT_NOT"):
        return [list(av[1])]
    return []


def first_chars(pattern: re.Pattern[str]) -> str | None:
    """A character class (regex text) holding every character a match of ``pattern``
    can start with, or None when that is unknown or the pattern can match an empty
    string. Case-insensitive letters are listed in both cases (ASCII matching only)."""
    try:
        tree = _parser().parse(pattern.pattern, pattern.flags)
    except re.error:
        return None
    items, nullable = _sequence(list(tree), pattern.flags)
    if items is None or nullable or not items:
        return None
    return "[" + "".join(sorted(items)) + "]"


_Firsts = tuple[set[str] | None, bool]  # class items (None: unknown), can match nothing


def _sequence(items: list[tuple[Any, Any]], flags: int) -> _Firsts:
    found: set[str] = set()
    for op, av in items:
        first, nullable = _node(str(op), av, flags)
        if first is None:
            return None, False
        found |= first
        if not nullable:
            return found, False
    return found, True


def _node(name: str, av: Any, flags: int) -> _Firsts:
    if name == "LITERAL":
        chars = _cased(int(av), flags)
        return (None, False) if chars is None else ({_char(c) for c in chars}, False)
    if name == "IN":
        return _class(av, flags), False
    if name == "SUBPATTERN":
        _group, add, remove, sub = av
        return _sequence(list(sub), (flags | add) & ~remove)
    if name == "ATOMIC_GROUP":
        return _sequence(list(av), flags)
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        low, _high, item = av
        first, nullable = _sequence(list(item), flags)
        return first, nullable or low == 0
    if name == "BRANCH":
        union: set[str] = set()
        empty = False
        for alt in av[1]:
            first, nullable = _sequence(list(alt), flags)
            if first is None:
                return None, False
            union |= first
            empty = empty or nullable
        return union, empty
    if name in ("AT", "ASSERT", "ASSERT_NOT"):
        return set(), True  # consumes nothing; what follows starts the match
    return None, False


def _class(items: list[tuple[Any, Any]], flags: int) -> set[str] | None:
    out: set[str] = set()
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            chars = _cased(int(av), flags)
            if chars is None:
                return None
            out.update(_char(c) for c in chars)
        elif name == "RANGE":
            lo, hi = av
            ranges = _cased_range(int(lo), int(hi), flags)
            if ranges is None:
                return None
            out.update(f"{_char(a)}-{_char(b)}" for a, b in ranges)
        elif name == "CATEGORY" and str(av) in _CATEGORIES:
            out.add(_CATEGORIES[str(av)])  # Unicode classes: a superset of ASCII ones
        else:  # NEGATE and the rest: not worth listing
            return None
    return out


def _char(code: int) -> str:
    return f"\\U{code:08x}"


_CLASS_ITEM = re.compile(r"\\U([0-9a-f]{8})(?:-\\U([0-9a-f]{8}))?|(\\[dDsSwW])")


def ascii_part(first: str) -> str | None:
    """The part of a class from :func:`first_chars` that an ASCII text can hold
    (None when none: a match of such a pattern never starts in an ASCII text)."""
    items: list[str] = []
    for m in _CLASS_ITEM.finditer(first):
        lo, hi, category = m.groups()
        if category:
            items.append(category)
        elif int(lo, 16) < 128:
            items.append(_char(int(lo, 16)) if hi is None
                         else f"{_char(int(lo, 16))}-{_char(min(int(hi, 16), 127))}")
    return "[" + "".join(items) + "]" if items else None


def _cased(code: int, flags: int) -> list[int] | None:
    """The characters a literal matches: itself, and its other ASCII case when
    matching ignores case in ASCII; None for Unicode case-insensitive letters."""
    if not flags & re.IGNORECASE:
        return [code]
    c = chr(code)
    if c.isascii() and c.isalpha():
        return [code, ord(c.swapcase())] if flags & re.ASCII else None
    # Unicode case folding has odd pairs (K and the Kelvin sign): only ASCII
    # characters without case are known to match nothing else
    return [code] if flags & re.ASCII or c.isascii() else None


def _cased_range(lo: int, hi: int, flags: int) -> list[tuple[int, int]] | None:
    if not flags & re.IGNORECASE:
        return [(lo, hi)]
    if not flags & re.ASCII:
        caseless = hi < 128 and all(_cased(c, flags) is not None for c in range(lo, hi + 1))
        return [(lo, hi)] if caseless else None
    out = [(lo, hi)]
    for a, b, shift in ((ord("a"), ord("z"), -32), (ord("A"), ord("Z"), 32)):
        x, y = max(lo, a), min(hi, b)
        if x <= y:
            out.append((x + shift, y + shift))
    return out


def _common(first: str) -> bool:
    """True when a class lists ASCII lower-case letters (frequent in prose)."""
    compiled = re.compile(first)
    return any(compiled.match(c) for c in "etaoinshrdlcumwfgypbvkjxqz")


_ORDER = ("rare", "free", "common")
MERGE_MAX = 10  # alternatives of both kinds that one search takes together


def _kind(first: str | None) -> str:
    return "free" if first is None else "common" if _common(first) else "rare"


def _search_for(alternatives: list[str], first: str | None) -> re.Pattern[str]:
    joined = "|".join(alternatives)
    if first is None:
        return re.compile(joined)
    return re.compile(first + "(?<=(?=" + joined + r")[\s\S])")


@dataclass(frozen=True, slots=True)
class _Alternative:
    index: int  # of the recognizer
    source: str
    first: str | None


_DIGITS = b"0123456789"


@dataclass(frozen=True)
class TextGate:
    """The joined gates of some recognizers. ``gated[i]`` says whether recognizer
    ``i`` is covered; ``clear(text)`` is True only when no covered recognizer can
    find anything in ``text``.

    ``plain`` searches run in the text, ``lowered`` ones in ``text.lower()``. An ASCII
    text gets smaller ones: less what can only start with another character, and
    less the recognizers that need more digits than it has (``ascii[i]``: the
    searches for a text of at least ``ascii_digits[i]`` digits)."""

    plain: tuple[re.Pattern[str], ...]
    lowered: tuple[re.Pattern[str], ...]
    gated: tuple[bool, ...]
    ascii: tuple[tuple[re.Pattern[str], ...], ...] = ((),)
    ascii_digits: tuple[int, ...] = (0,)
    ascii_lowered: tuple[re.Pattern[str], ...] = ()
    covers_all: bool = field(init=False)  # every recognizer has a gate

    def __post_init__(self) -> None:
        object.__setattr__(self, "covers_all", all(self.gated))

    def clear(self, text: str) -> bool:
        if text.isascii():
            lowered = self.ascii_lowered
            bounds = self.ascii_digits
            plain = self.ascii[0]
            if len(bounds) > 1:
                raw = text.encode()
                digits = len(raw) - len(raw.translate(None, _DIGITS))
                plain = self.ascii[bisect_right(bounds, digits) - 1]
        else:
            plain, lowered = self.plain, self.lowered
        for p in plain:
            if p.search(text) is not None:
                return False
        if lowered:
            low = text.lower()
            if len(low) != len(text):  # such recognizers then match case-blind on text
                return False
            for p in lowered:
                if p.search(low) is not None:
                    return False
        return True

    @classmethod
    def of(cls, gates: Sequence[Gate | None]) -> TextGate:
        """Joins the usable gates (None: a recognizer without one, never covered)."""
        alts: list[tuple[Gate, _Alternative, _Alternative | None]] = []
        names: set[str] = set()
        gated = [False] * len(gates)
        for i, gate in enumerate(gates):
            source = alternative(gate.pattern) if gate is not None else None
            if gate is None or source is None or names & set(gate.pattern.groupindex):
                continue
            names.update(gate.pattern.groupindex)
            gated[i] = True
            alt = _Alternative(i, source, first_chars(gate.pattern))
            in_ascii: _Alternative | None = alt  # for ASCII texts: the ASCII characters
            if alt.first is not None:
                first = ascii_part(alt.first)  # None: its matches never start in ASCII
                in_ascii = None if first is None else _Alternative(i, source, first)
            alts.append((gate, alt, in_ascii))
        compiled: dict[str, re.Pattern[str]] = {}

        def searches(members: list[_Alternative]) -> tuple[re.Pattern[str], ...]:
            kinds: dict[str, list[_Alternative]] = {}
            for a in members:
                kinds.setdefault(_kind(a.first), []).append(a)
            rare, common = kinds.get("rare", []), kinds.get("common", [])
            if rare and common and len(rare) + len(common) <= MERGE_MAX:
                kinds["rare"] = rare + common  # few: one search costs less than two
                del kinds["common"]
            out = []
            # the rare first characters first: where something may be found they find
            # it soonest (the common ones, secrets' prefixes, mostly scan everything)
            for kind, group in sorted(kinds.items(), key=lambda kv: _ORDER.index(kv[0])):
                first = None if kind == "free" else "[" + "".join(
                    a.first[1:-1] for a in group if a.first) + "]"
                key = f"{first}|{'|'.join(a.source for a in group)}"
                try:
                    if key not in compiled:
                        compiled[key] = _search_for([a.source for a in group], first)
                except re.error:  # e.g. too large: these recognizers always run
                    for a in group:
                        gated[a.index] = False
                    continue
                out.append(compiled[key])
            return tuple(out)

        plain = searches([a for g, a, _ in alts if not g.lowered])
        lowered = searches([a for g, a, _ in alts if g.lowered])
        ascii_lowered = searches([b for g, _, b in alts if g.lowered and b is not None])
        bounds = sorted({0} | {g.digits for g, _, b in alts if not g.lowered and b is not None})
        ascii_plain = tuple(searches([b for g, _, b in alts if not g.lowered
                                      and b is not None and g.digits <= bound])
                            for bound in bounds)
        return cls(plain, lowered, tuple(gated), ascii_plain, tuple(bounds), ascii_lowered)
