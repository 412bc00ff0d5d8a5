"""What a cache hit is billed (docs/CACHE.md, "Billing and the ledger"), from the
billing rule and the list price of the tokens it saved: the money the ledger records,
and the tokens it counts against token limits. Admission settles a hit at exactly
this, so budgets see what the ledger bills."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from tokenplane.config.cache_schema import CacheBillingConfig


@dataclass(frozen=True, slots=True)
class HitCharge:
    """``cost_micros``: what the hit is billed; ``list_micros``: the list price of the
    tokens it saved; ``input_tokens`` / ``output_tokens``: what it counts against
    token limits (``billing.tokens``); ``currency`` and ``price_version`` of the
    prices used."""

    input_tokens: int
    output_tokens: int
    cost_micros: int
    list_micros: int
    currency: str
    price_version: str

    @property
    def saved_micros(self) -> int:
        return self.list_micros - self.cost_micros


def _share(charge: Decimal, amount: int) -> int:
    return int((Decimal(amount) * charge).to_integral_value(ROUND_HALF_UP))


def hit_charge(rule: CacheBillingConfig, saved_input: int, saved_output: int,
               list_micros: int, currency: str, price_version: str) -> HitCharge:
    """``free``: no money; ``discounted``: ``charge`` times the list price (rounded half
    up). Tokens: none (``tokens: none``, the default: nothing ran upstream), the saved
    ones (``saved``), or ``charge`` times them, each direction rounded half up
    (``charged``; none when the hit is free)."""
    share = rule.charge if rule.mode == "discounted" else Decimal(0)
    tokens_in = tokens_out = 0
    if rule.tokens == "saved":
        tokens_in, tokens_out = saved_input, saved_output
    elif rule.tokens == "charged":
        tokens_in, tokens_out = _share(share, saved_input), _share(share, saved_output)
    return HitCharge(tokens_in, tokens_out, _share(share, list_micros), list_micros,
                     currency, price_version)
