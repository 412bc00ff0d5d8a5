"""Limit specifications: what an operator configures per scope, and its primitive rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tokenplane.admission.amounts import UNITS, Unit
from tokenplane.admission.periods import Period

RuleKind = Literal["window", "calendar", "gauge"]
DenialCode = Literal["rate_limit_exceeded", "budget_exceeded", "concurrency_limit_exceeded"]
TpmUnit = Literal["input_tokens", "output_tokens", "total_tokens"]

CODES: dict[RuleKind, DenialCode] = {
    "window": "rate_limit_exceeded",
    "calendar": "budget_exceeded",
    "gauge": "concurrency_limit_exceeded",
}


class LimitError(ValueError):
    """A limit specification that cannot be enforced; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class LimitRule:
    """One primitive limit.

    ``window``: at most ``limit`` units granted in any sliding interval of
    ``window_s`` seconds. ``calendar``: at most ``limit`` units per window of
    ``period``. ``gauge``: at most ``limit`` units held by unfinished requests.
    """

    name: str
    kind: RuleKind
    unit: Unit
    limit: int
    window_s: float = 60.0
    period: Period | None = None

    def __post_init__(self) -> None:
        if not self.name or ":" in self.name:
            raise LimitError(f"limit name must be non-empty without ':', got {self.name!r}")
        if self.unit not in UNITS:
            raise LimitError(f"limit {self.name}: unit must be one of {UNITS}")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0:
            raise LimitError(
                f"limit {self.name}: value must be an integer >= 0, got {self.limit!r}"
            )
        if self.kind == "window" and not (0.001 <= self.window_s <= 31 * 86_400):
            raise LimitError(f"limit {self.name}: window_s must be in [0.001, 2678400]")
        if self.kind == "calendar" and self.period is None:
            raise LimitError(f"limit {self.name}: a calendar limit needs a period")

    @property
    def code(self) -> DenialCode:
        return CODES[self.kind]

    @property
    def window_ms(self) -> int:
        return round(self.window_s * 1000)


def _check(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise LimitError(f"{name} must be an integer >= 0 (or unset), got {value!r}")


@dataclass(frozen=True, slots=True)
class ScopeLimits:
    """Every limit one scope can carry; ``None`` means unlimited.

    Money is in integer micro-units (1_000_000 = one unit of the currency).
    """

    rpm: int | None = None
    tpm: int | None = None
    tpm_unit: TpmUnit = "total_tokens"
    tokens_per_day: int | None = None
    tokens_per_month: int | None = None
    budget_micros: int | None = None
    budget_period: Period = field(default_factory=Period)
    max_concurrent: int | None = None
    max_tokens_in_flight: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "rpm",
            "tpm",
            "tokens_per_day",
            "tokens_per_month",
            "budget_micros",
            "max_concurrent",
            "max_tokens_in_flight",
        ):
            _check(name, getattr(self, name))
        if self.tpm_unit not in ("input_tokens", "output_tokens", "total_tokens"):
            raise LimitError(
                f"tpm_unit must be input_tokens, output_tokens or total_tokens, "
                f"got {self.tpm_unit!r}"
            )
        if not isinstance(self.budget_period, Period):
            raise LimitError("budget_period must be a Period")

    def rules(self) -> tuple[LimitRule, ...]:
        out: list[LimitRule] = []
        if self.rpm is not None:
            out.append(LimitRule("rpm", "window", "requests", self.rpm, 60.0))
        if self.tpm is not None:
            out.append(LimitRule("tpm", "window", self.tpm_unit, self.tpm, 60.0))
        if self.tokens_per_day is not None:
            out.append(
                LimitRule("tokens_per_day", "calendar", "total_tokens", self.tokens_per_day,
                          period=Period("daily"))
            )
        if self.tokens_per_month is not None:
            out.append(
                LimitRule("tokens_per_month", "calendar", "total_tokens", self.tokens_per_month,
                          period=Period("monthly"))
            )
        if self.budget_micros is not None:
            out.append(
                LimitRule("budget", "calendar", "cost_micros", self.budget_micros,
                          period=self.budget_period)
            )
        if self.max_concurrent is not None:
            out.append(LimitRule("max_concurrent", "gauge", "requests", self.max_concurrent))
        if self.max_tokens_in_flight is not None:
            out.append(
                LimitRule("max_tokens_in_flight", "gauge", "total_tokens",
                          self.max_tokens_in_flight)
            )
        return tuple(out)
