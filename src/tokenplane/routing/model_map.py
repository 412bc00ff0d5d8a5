"""The model names clients send mapped to the gateway's aliases (``model_map``).

Agents name models by their vendor's names (``claude-sonnet-4-6``, ``gpt-5-codex``);
a rule maps an exact name or a glob (``claude-*``) to an alias, for every tenant or for
the tenants it lists. The first rule that matches wins; a name no rule matches is
taken as an alias itself. Exact names are looked up in a dict; globs are tried in
order, and each answer is memoised per (tenant, name), bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

_GLOB = frozenset("*?[")
MEMO_MAX = 4096


@dataclass(frozen=True, slots=True)
class MapRule:
    match: str
    alias: str
    tenants: frozenset[str] | None = None  # None: every tenant

    @property
    def is_glob(self) -> bool:
        return any(c in _GLOB for c in self.match)

    def applies(self, tenant: str | None, name: str) -> bool:
        if self.tenants is not None and tenant not in self.tenants:
            return False
        return fnmatchcase(name, self.match) if self.is_glob else name == self.match


class ModelMap:
    __slots__ = ("_memo", "_rules")

    def __init__(self, rules: Iterable[MapRule] = ()) -> None:
        self._rules = tuple(rules)
        self._memo: dict[tuple[str | None, str], str] = {}

    def __bool__(self) -> bool:
        return bool(self._rules)

    @property
    def rules(self) -> tuple[MapRule, ...]:
        return self._rules

    def resolve(self, tenant: str | None, name: str) -> str:
        """The alias for ``name`` as ``tenant`` sent it (``name`` itself when no rule
        matches)."""
        if not self._rules:
            return name
        key = (tenant, name)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        alias = next((r.alias for r in self._rules if r.applies(tenant, name)), name)
        if len(self._memo) >= MEMO_MAX:
            self._memo.clear()
        self._memo[key] = alias
        return alias
