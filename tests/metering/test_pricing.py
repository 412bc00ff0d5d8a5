from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.metering.events import UsageEvent
from tokenplane.metering.pricing import UNPRICED, PriceBook, Prices

TABLE = {
    "currency": "USD",
    "models": {
        "big": {
            "input": "2.50",
            "cached_input": "1.25",
            "cache_write": "3.125",
            "output": "10.00",
            "reasoning": "12",
            "per_request": "0.001",
            "tiers": [{"above_input_tokens": 200000, "input": "5.00", "output": "15.00"}],
        },
        "small": {"input": "0.075", "output": "0.3"},
    },
}


def ev(model: str = "big", **kw: int) -> UsageEvent:
    return UsageEvent(request_id="r", attempt=0, ts=0.0, model=model, **kw)  # type: ignore[arg-type]


def test_cost_by_kind_is_exact() -> None:
    book = PriceBook(TABLE)
    e = ev(
        input_tokens=1000,
        cached_input_tokens=400,
        cache_write_tokens=100,
        output_tokens=300,
        reasoning_tokens=100,
    )
    # 500 uncached*2.5 + 400*1.25 + 100*3.125 + 200*10 + 100*12 + 0.001*1e6
    # = 6262.5 micro-units, rounded half up
    cost, version = book.cost(e)
    assert cost == 6263
    assert version == book.version


def test_tier_applies_above_threshold_only() -> None:
    book = PriceBook(TABLE)
    at = book.cost(ev(input_tokens=200_000, output_tokens=1000))[0]
    above = book.cost(ev(input_tokens=200_001, output_tokens=1000))[0]
    assert at == 200_000 * 2.5 + 1000 * 10 + 1000
    assert above == (200_001 * 5 + 1000 * 15 + 1000)


def test_reasoning_defaults_to_output_price_and_fallback_model() -> None:
    book = PriceBook({"models": {"*": {"output": "2"}}})
    assert book.cost(ev("anything", output_tokens=10, reasoning_tokens=10))[0] == 20


def test_unknown_model_is_unpriced() -> None:
    assert PriceBook(TABLE).cost(ev("nope", input_tokens=5)) == (0, UNPRICED)


def test_version_is_content_hash() -> None:
    a, b = PriceBook(TABLE), PriceBook(dict(TABLE))
    assert a.version == b.version
    changed = {"currency": "USD", "models": {**TABLE["models"], "small": {"input": "0.1"}}}
    assert PriceBook(changed).version != a.version


def test_float_prices_rejected() -> None:
    with pytest.raises(ValueError, match="strings"):
        PriceBook({"models": {"m": {"input": 0.1}}})
    with pytest.raises(ValueError, match="unknown price fields"):
        PriceBook({"models": {"m": {"inptu": "1"}}})


@given(
    price=st.decimals(min_value=0, max_value=1000, places=6, allow_nan=False),
    out_price=st.decimals(min_value=0, max_value=1000, places=6, allow_nan=False),
    inp=st.integers(0, 10**7),
    out=st.integers(0, 10**6),
)
def test_cost_matches_exact_rational(
    price: Decimal, out_price: Decimal, inp: int, out: int
) -> None:
    book = PriceBook({"models": {"m": {"input": str(price), "output": str(out_price)}}})
    exact = Fraction(inp) * Fraction(price) + Fraction(out) * Fraction(out_price)
    cost = book.cost(ev("m", input_tokens=inp, output_tokens=out))[0]
    assert cost == math.floor(exact + Fraction(1, 2))  # rounded once, half up


def test_load_yaml_keeps_prices_exact(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(
        "currency: EUR\n"
        "models:\n"
        "  m:\n"
        "    input: 0.1\n"  # unquoted in YAML, still read as the decimal 0.1
        "    output: '0.3'\n"
        "    tiers:\n"
        "      - above_input_tokens: 1000\n"
        "        input: 0.2\n"
    )
    book = PriceBook.load(path)
    assert book.currency == "EUR"
    assert book.cost(ev("m", input_tokens=1000, output_tokens=10))[0] == 100 + 3
    assert book.cost(ev("m", input_tokens=1001))[0] == round(Decimal("1001") * Decimal("0.2"))


_price = st.decimals(min_value=0, max_value=1000, places=4, allow_nan=False, allow_infinity=False)
_tokens = st.integers(min_value=-5, max_value=10**9)


@settings(max_examples=300, deadline=None)
@given(_price, _price, _price, _price, st.none() | _price, _price,
       _tokens, _tokens, _tokens, _tokens, _tokens)
def test_integer_cost_equals_the_decimal_formula(
    p_in: Decimal, p_cached: Decimal, p_write: Decimal, p_out: Decimal, p_reason: Decimal | None,
    p_req: Decimal, inp: int, cached: int, written: int, out: int, reasoning: int,
) -> None:
    prices = Prices(p_in, p_cached, p_write, p_out, p_reason, p_req)
    ev = UsageEvent("r", 0, 0.0, input_tokens=inp, cached_input_tokens=cached,
                    cache_write_tokens=written, output_tokens=out, reasoning_tokens=reasoning)
    c, w = max(0, cached), max(0, written)
    r = max(0, min(reasoning, out))
    reference = (max(0, inp - c - w) * p_in + c * p_cached + w * p_write
                 + max(0, out - r) * p_out + r * (p_out if p_reason is None else p_reason)
                 + p_req * Decimal(1_000_000))
    assert prices.cost_micros(ev) == int(reference.to_integral_value(rounding=ROUND_HALF_UP))
