"""Prices per model and the exact cost of a usage event.

Prices are per 1M tokens, given as decimal strings in config, and the arithmetic is
``Decimal`` from end to end: a price per 1M tokens times a token count *is* an amount
in micro-units (1e-6 of the currency), so a cost is the sum of ``tokens * price``
rounded once, half up, to an integer number of micros. No float is ever involved.

A ``PriceBook`` is immutable and carries a version: a content hash of its table. The
version is stored on every event priced with it, so a price change never rewrites
history; old events keep the cost and the version they were recorded with.

Config shape::

    currency: USD
    models:
      gpt-4o:
        input: "2.50"          # per 1M uncached input tokens
        cached_input: "1.25"   # per 1M tokens read from the prompt cache
        cache_write: "3.125"   # per 1M tokens written to the prompt cache (5-minute TTL)
        cache_write_1h: "5.00" # per 1M tokens written to a 1-hour cache (default: cache_write)
        output: "10.00"        # per 1M output tokens (non-reasoning)
        reasoning: "10.00"     # per 1M reasoning tokens (default: output)
        per_request: "0"       # flat amount per attempt, in currency units
        tiers:                 # prices above a prompt length replace the base ones
          - above_input_tokens: 200000
            input: "5.00"
            output: "15.00"
      "*": {...}               # optional fallback for models not listed
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
import yaml

from tokenplane.metering.events import UsageEvent

UNPRICED = "unpriced"
_PRICE_FIELDS = ("input", "cached_input", "cache_write", "output", "reasoning", "per_request",
                 "cache_write_1h")
_MICROS = Decimal(1_000_000)


def _dec(value: Any, where: str) -> Decimal:
    if isinstance(value, float):
        raise ValueError(f"{where}: give prices as strings, not floats ({value!r})")
    try:
        out = Decimal(str(value))
    except InvalidOperation as exc:
        raise ValueError(f"{where}: not a decimal number: {value!r}") from exc
    if not out.is_finite() or out < 0:
        raise ValueError(f"{where}: price must be a finite non-negative number")
    return out


@dataclass(frozen=True, slots=True)
class Prices:
    """Per-1M-token prices (``per_request`` in currency units)."""

    input: Decimal = Decimal(0)
    cached_input: Decimal = Decimal(0)
    cache_write: Decimal = Decimal(0)
    output: Decimal = Decimal(0)
    reasoning: Decimal | None = None  # None: same as output
    per_request: Decimal = Decimal(0)
    cache_write_1h: Decimal | None = None  # None: same as cache_write

    def overlaid(self, spec: Mapping[str, Any], where: str) -> Prices:
        v = {k: _dec(spec[k], f"{where}.{k}") if k in spec else getattr(self, k)
             for k in _PRICE_FIELDS}
        return Prices(v["input"], v["cached_input"], v["cache_write"], v["output"],
                      v["reasoning"], v["per_request"], v["cache_write_1h"])

    # The prices as integers over one common denominator (exact, like the Decimals):
    # a cost is then integer arithmetic, a few times faster than Decimal's.
    _rates: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        reasoning = self.output if self.reasoning is None else self.reasoning
        write_1h = self.cache_write if self.cache_write_1h is None else self.cache_write_1h
        values = (self.input, self.cached_input, self.cache_write, self.output, reasoning,
                  self.per_request * _MICROS, write_1h)
        ratios = [v.as_integer_ratio() for v in values]
        den = math.lcm(*(d for _, d in ratios))
        object.__setattr__(self, "_rates", (*(n * (den // d) for n, d in ratios), den))

    def cost_micros(self, event: UsageEvent) -> int:
        cached = max(0, event.cached_input_tokens)
        written = max(0, event.cache_write_tokens)
        written_1h = max(0, min(event.cache_write_1h_tokens, written))
        uncached = max(0, event.input_tokens - cached - written)
        reasoning = max(0, min(event.reasoning_tokens, event.output_tokens))
        plain_out = max(0, event.output_tokens - reasoning)
        r_in, r_cached, r_write, r_out, r_reason, r_req, r_write_1h, den = self._rates
        total = (uncached * r_in + cached * r_cached + (written - written_1h) * r_write
                 + written_1h * r_write_1h + plain_out * r_out + reasoning * r_reason + r_req)
        return (2 * total + den) // (2 * den)  # rounded half up (total is never negative)


@dataclass(frozen=True, slots=True)
class ModelPrice:
    base: Prices
    tiers: tuple[tuple[int, Prices], ...] = ()  # (above_input_tokens, prices), ascending

    def for_prompt(self, input_tokens: int) -> Prices:
        chosen = self.base
        for threshold, prices in self.tiers:
            if input_tokens > threshold:
                chosen = prices
        return chosen


def _parse_model(name: str, spec: Mapping[str, Any]) -> ModelPrice:
    unknown = set(spec) - set(_PRICE_FIELDS) - {"tiers"}
    if unknown:
        raise ValueError(f"models.{name}: unknown price fields {sorted(unknown)}")
    base = Prices().overlaid(spec, f"models.{name}")
    tiers: list[tuple[int, Prices]] = []
    for i, tier in enumerate(spec.get("tiers") or []):
        where = f"models.{name}.tiers[{i}]"
        if "above_input_tokens" not in tier:
            raise ValueError(f"{where}: missing above_input_tokens")
        threshold = int(tier["above_input_tokens"])
        tiers.append((threshold, base.overlaid(tier, where)))
    tiers.sort(key=lambda t: t[0])
    return ModelPrice(base=base, tiers=tuple(tiers))


class PriceBook:
    """An immutable, versioned price table."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        self._table = _canonical(table)
        self.currency = str(table.get("currency", "USD"))
        models = table.get("models") or {}
        self._models = {str(n): _parse_model(str(n), spec) for n, spec in models.items()}
        digest = hashlib.sha256(orjson.dumps(self._table, option=orjson.OPT_SORT_KEYS))
        self.version = digest.hexdigest()[:16]

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PriceBook:
        """Read a price table from a YAML or JSON file."""
        with open(path, encoding="utf-8") as fh:
            # BaseLoader keeps every scalar a string: prices stay exact decimals.
            table = yaml.load(fh, Loader=yaml.BaseLoader)
        if not isinstance(table, Mapping):
            raise ValueError(f"{path}: a price table must be a mapping")
        return cls(_numbers_from_strings(table))

    @classmethod
    def empty(cls) -> PriceBook:
        return cls({"currency": "USD", "models": {}})

    def table(self) -> dict[str, Any]:
        """The canonical table (prices as strings) this version hashes."""
        loaded: dict[str, Any] = orjson.loads(orjson.dumps(self._table))
        return loaded

    def model_price(self, event: UsageEvent) -> ModelPrice | None:
        for name in (event.model, event.response_model, "*"):
            if name and name in self._models:
                return self._models[name]
        return None

    def cost(self, event: UsageEvent) -> tuple[int, str]:
        """``(cost_micros, price_version)``; ``(0, "unpriced")`` for unknown models."""
        price = self.model_price(event)
        if price is None:
            return 0, UNPRICED
        return price.for_prompt(event.input_tokens).cost_micros(event), self.version

    def price(self, event: UsageEvent) -> UsageEvent:
        """Fill ``cost_micros``, ``currency`` and ``price_version`` in place; return it."""
        event.cost_micros, event.price_version = self.cost(event)
        event.currency = self.currency
        return event


def _numbers_from_strings(table: Mapping[str, Any]) -> dict[str, Any]:
    """Undo BaseLoader's strings where an integer is meant (tier thresholds)."""
    out = dict(table)
    models = {}
    for name, spec in (table.get("models") or {}).items():
        spec = dict(spec)
        if spec.get("tiers"):
            spec["tiers"] = [
                {**tier, "above_input_tokens": int(tier["above_input_tokens"])}
                for tier in spec["tiers"]
            ]
        models[name] = spec
    out["models"] = models
    return out


def _canonical(value: Any) -> Any:
    """Prices normalised to strings so equal tables hash equal however they were typed."""
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float):
        raise ValueError(f"give prices as strings, not floats ({value!r})")
    return value
