"""What a request consumes, per unit a limit can count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Unit = Literal["requests", "input_tokens", "output_tokens", "total_tokens", "cost_micros"]
UNITS: tuple[Unit, ...] = (
    "requests",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost_micros",
)
TOKEN_UNITS: tuple[Unit, ...] = ("input_tokens", "output_tokens", "total_tokens")


@dataclass(frozen=True, slots=True)
class Amounts:
    """Requests, tokens and money (integer micro-units of the currency)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0

    def __post_init__(self) -> None:
        for name in ("requests", "input_tokens", "output_tokens", "cost_micros"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"amount {name} must be a non-negative integer, got {value!r}")

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def of(self, unit: Unit) -> int:
        if unit == "requests":
            return self.requests
        if unit == "input_tokens":
            return self.input_tokens
        if unit == "output_tokens":
            return self.output_tokens
        if unit == "total_tokens":
            return self.input_tokens + self.output_tokens
        return self.cost_micros

    def vector(self) -> list[int]:
        """``[requests, input, output, cost]``: the wire form the Redis script reads."""
        return [self.requests, self.input_tokens, self.output_tokens, self.cost_micros]

    def __add__(self, other: Amounts) -> Amounts:
        return Amounts(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_micros + other.cost_micros,
        )


def unit_index(unit: Unit) -> int:
    """1-based position of ``unit`` in :data:`UNITS` (Lua arrays start at 1)."""
    return UNITS.index(unit) + 1
