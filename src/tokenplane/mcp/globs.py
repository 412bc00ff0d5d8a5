"""A set of globs (``*``, ``?``, ``[...]`` as :mod:`fnmatch`, case-sensitive) matched
fast: exact names by a set, ``prefix*`` globs by one ``str.startswith`` over a tuple,
the rest by one compiled alternation."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

_SPECIAL = frozenset("*?[")


class GlobSet:
    __slots__ = ("everything", "exact", "literal_heads", "prefixes", "regex")

    def __init__(self, globs: Iterable[str]) -> None:
        exact: set[str] = set()
        prefixes: list[str] = []
        rest: list[str] = []
        for g in globs:
            head = g[:-1]
            if not _SPECIAL & set(g):
                exact.add(g)
            elif g.endswith("*") and not _SPECIAL & set(head):
                prefixes.append(head)
            else:
                rest.append(g)
        self.everything = "" in prefixes
        # the literal start of every glob: what a name must begin with to match it
        self.literal_heads = tuple(_head(g) for g in (*exact, *prefixes, *rest))
        self.exact = frozenset(exact)
        self.prefixes = tuple(prefixes)
        self.regex = (re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in rest))
                      if rest else None)

    def __bool__(self) -> bool:
        return bool(self.exact or self.prefixes or self.regex is not None)

    def may_match_prefix(self, start: str) -> bool:
        """Whether some name beginning with ``start`` could match a glob."""
        return any(h.startswith(start) or start.startswith(h) for h in self.literal_heads)

    def matches(self, name: str) -> bool:
        if self.everything or name in self.exact:
            return True
        if self.prefixes and name.startswith(self.prefixes):
            return True
        return self.regex is not None and self.regex.match(name) is not None


def _head(glob: str) -> str:
    for i, ch in enumerate(glob):
        if ch in _SPECIAL:
            return glob[:i]
    return glob
