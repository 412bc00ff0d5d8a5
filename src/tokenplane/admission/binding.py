"""Limits bound to scopes and to the calendar window in force at a given instant."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tokenplane.admission.amounts import unit_index
from tokenplane.admission.book import Wire
from tokenplane.admission.limits import LimitRule, ScopeLimits
from tokenplane.admission.scopes import Scope


def limit_key(scope: Scope, rule: LimitRule) -> str:
    """Store key of one limit's counters, unique within the tenant.

    Calendar keys name their schedule: window ids of different schedules are not
    comparable, so changing a budget's period starts fresh counters.
    """
    base = f"{scope.label}:{rule.name}"
    period = rule.period
    if rule.kind != "calendar" or period is None:
        return base
    if period.kind == "fixed":
        marks = ",".join(str(int(t * 1000)) for t in period.resets_at)
        return f"{base}/fixed-{zlib.crc32(marks.encode()):08x}"
    return f"{base}/{period.kind}"


@dataclass(frozen=True, slots=True)
class BoundLimit:
    """One rule of one scope, with the calendar window current at bind time."""

    scope: Scope
    rule: LimitRule
    win: int = 0
    win_end_ms: int = 0
    key: str = ""

    def wire(self) -> Wire:
        """``(key, kind, unit, limit, param, window_end_ms)``: see :mod:`book`."""
        rule = self.rule
        param = rule.window_ms if rule.kind == "window" else self.win
        return (self.key or limit_key(self.scope, rule), rule.kind[0], unit_index(rule.unit),
                rule.limit, param, self.win_end_ms)


def bind(scope: Scope, rule: LimitRule, now: float, key: str = "") -> BoundLimit:
    key = key or limit_key(scope, rule)
    if rule.kind == "calendar" and rule.period is not None:
        window = rule.period.window(now)
        return BoundLimit(scope, rule, window.id, window.end_ms, key)
    return BoundLimit(scope, rule, key=key)


def rebind(limits: Iterable[BoundLimit], now: float) -> list[BoundLimit]:
    """The same limits with the calendar windows current at ``now``."""
    return [bind(b.scope, b.rule, now, b.key) for b in limits]


class LimitTable:
    """Configured limits per scope (read-mostly; replaced wholesale on reload)."""

    def __init__(self, limits: Mapping[Scope, ScopeLimits] | None = None) -> None:
        self._rules: dict[Scope, tuple[LimitRule, ...]] = {}
        self._keys: dict[Scope, tuple[str, ...]] = {}
        for scope, spec in (limits or {}).items():
            self.set(scope, spec)

    def set(self, scope: Scope, spec: ScopeLimits) -> None:
        self.set_rules(scope, spec.rules())

    def set_rules(self, scope: Scope, rules: tuple[LimitRule, ...]) -> None:
        """Primitive rules directly (for windows other than a minute, for example)."""
        names = [r.name for r in rules]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate limit names for {scope.label}: {names}")
        if rules:
            self._rules[scope] = rules
            self._keys[scope] = tuple(limit_key(scope, r) for r in rules)
        else:
            self.remove(scope)

    def remove(self, scope: Scope) -> None:
        self._rules.pop(scope, None)
        self._keys.pop(scope, None)

    def has_limits(self) -> bool:
        """Whether any scope has a limit."""
        return bool(self._rules)

    def rules(self, scope: Scope) -> tuple[LimitRule, ...]:
        return self._rules.get(scope, ())

    def bind(self, scopes: Sequence[Scope], now: float) -> list[BoundLimit]:
        """Every limit of every scope in ``scopes``, in chain order."""
        out: list[BoundLimit] = []
        for scope in dict.fromkeys(scopes):
            rules = self._rules.get(scope)
            if rules is None:
                continue
            for rule, key in zip(rules, self._keys[scope], strict=True):
                out.append(bind(scope, rule, now, key))
        return out
