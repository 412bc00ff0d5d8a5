"""The price book the meter uses, built from the model aliases' ``prices``."""

from __future__ import annotations

from typing import Any

from tokenplane.config.schema import ModelConfig
from tokenplane.metering.pricing import PriceBook


def price_book(models: list[ModelConfig]) -> PriceBook:
    """One currency for all aliases (the config loader refuses a mix). A price left
    unset for cached input or cache writes is the input price: a provider that
    discounts cached tokens says by how much, and an unset price must not make tokens
    free."""
    currency = models[0].prices.currency if models else "USD"
    table: dict[str, Any] = {"currency": currency, "models": {}}
    for m in models:
        spec = m.prices.model_dump(mode="json", exclude_none=True, exclude={"currency"})
        spec.setdefault("cached_input", spec["input"])
        spec.setdefault("cache_write", spec["input"])
        if not spec.get("tiers"):
            spec.pop("tiers", None)
        table["models"][m.alias] = spec
    return PriceBook(table)
