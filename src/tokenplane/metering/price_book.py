"""The price book the meter uses, built from the model aliases' ``prices``."""

from __future__ import annotations

from typing import Any

from tokenplane.config.schema import ModelConfig
from tokenplane.metering.pricing import PriceBook


def price_book(models: list[ModelConfig]) -> PriceBook:
    currency = models[0].prices.currency if models else "USD"
    table: dict[str, Any] = {"currency": currency, "models": {}}
    for m in models:
        spec = m.prices.model_dump(mode="json", exclude_none=True, exclude={"currency"})
        if not spec.get("tiers"):
            spec.pop("tiers", None)
        table["models"][m.alias] = spec
    return PriceBook(table)
