"""What the admission core answers: grants, denials, debits, settlements, status."""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.admission.amounts import Amounts, Unit
from tokenplane.admission.binding import BoundLimit
from tokenplane.admission.limits import DenialCode, LimitRule, RuleKind
from tokenplane.admission.money import money, per, quantity
from tokenplane.admission.scopes import Scope
from tokenplane.timefmt import duration, utc_minute

ALERT_THRESHOLDS_PCT: tuple[int, ...] = (50, 80, 100)


@dataclass(frozen=True, slots=True)
class Alert:
    """A calendar budget crossed ``threshold_pct`` of its limit (upwards)."""

    scope: Scope
    limit_name: str
    threshold_pct: int
    used: int
    limit: int


@dataclass(frozen=True, slots=True)
class Headroom:
    """What is left of one limit right after a decision."""

    scope: Scope
    limit_name: str
    unit: Unit
    kind: RuleKind
    limit: int
    remaining: int
    reset_s: float


@dataclass(frozen=True, slots=True)
class Grant:
    """A reservation held at every scope; settle it with reconcile or release."""

    reservation_id: str
    tenant: str
    amounts: Amounts
    limits: tuple[BoundLimit, ...]
    expires_at: float
    headroom: tuple[Headroom, ...] = ()
    alerts: tuple[Alert, ...] = ()


@dataclass(frozen=True, slots=True)
class Denial:
    """Why a request (or a stream's next tokens) was refused.

    Names only the refusing scope and limit of the caller's own chain.
    ``retry_after_s`` is ``None`` when waiting cannot help (the amount exceeds the
    limit itself, or a concurrency limit whose holders' end is unknown). ``never``:
    the request alone asks more than the limit allows (``requested`` of ``unit``), so
    it can never pass as sent, however long the caller waits.
    """

    scope: Scope
    limit_name: str
    limit: int
    remaining: int
    retry_after_s: float | None
    code: DenialCode
    unit: Unit
    requested: int = 0
    never: bool = False
    rule: LimitRule | None = None

    @property
    def message(self) -> str:
        return self.describe()

    def describe(self, currency: str = "", now: float | None = None) -> str:
        """The refusal in words, money in ``currency`` (integer micros otherwise). With
        ``now``, a calendar budget says when it resets (``resets 2027-01-01 00:00 UTC
        (in 24 days)``) and a long wait is a duration, not seconds."""
        who = _who(self.scope)
        span = per(self.rule) if self.rule is not None else ""
        if self.never:
            allows = quantity(self.limit, self.unit, currency)
            over = f" per {span}" if span else " at once"
            return (
                f"This request can never pass the limit '{self.limit_name}' of {who}: it "
                f"needs {quantity(self.requested, self.unit, currency)} at once and the "
                f"limit allows {allows}{over}. Lower max_tokens or shorten the input."
            )
        wait = self._wait(now)
        if self.unit == "cost_micros":
            cur = currency
            return (
                f"Budget {money(self.limit, cur)}{'/' + span if span else ''} for {who} "
                f"reached: {money(self.remaining, cur)} remaining.{wait}"
            )
        what = {
            "rate_limit_exceeded": "Rate limit",
            "budget_exceeded": "Budget",
            "concurrency_limit_exceeded": "Concurrency limit",
        }[self.code]
        return (
            f"{what} '{self.limit_name}' of {self.scope.label} reached: limit {self.limit} "
            f"{self.unit}, remaining {self.remaining}.{wait}"
        )

    def _wait(self, now: float | None) -> str:
        after = self.retry_after_s
        if after is None:
            return ""
        if now is not None and self.rule is not None and self.rule.kind == "calendar":
            return f" It resets {utc_minute(now + after)} (in {duration(after)})."
        if after >= 60:
            return f" Retry in {duration(after)}."
        return f" Retry after {after:.3f}s."


def _who(scope: Scope) -> str:
    """``tenant acme``, ``key k1 (model m)``."""
    model = f" (model {scope.model})" if scope.model else ""
    return f"{scope.kind} {scope.id}{model}"


@dataclass(frozen=True, slots=True)
class DebitResult:
    """``ok``: the tokens are charged. Otherwise ``denial`` names the exhausted limit."""

    ok: bool
    denial: Denial | None = None
    alerts: tuple[Alert, ...] = ()

    @property
    def exhausted(self) -> bool:
        return not self.ok


@dataclass(frozen=True, slots=True)
class Settlement:
    """The outcome of reconcile / release; ``found`` is False for an unknown id."""

    found: bool
    alerts: tuple[Alert, ...] = ()


@dataclass(frozen=True, slots=True)
class LimitStatus:
    """Spent, reserved and remaining of one limit (reset time for windows)."""

    scope: Scope
    limit_name: str
    kind: RuleKind
    unit: Unit
    limit: int
    spent: int
    reserved: int
    remaining: int
    resets_at: float | None

