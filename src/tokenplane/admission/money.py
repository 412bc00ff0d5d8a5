"""How admission speaks of money and of the span a limit counts over."""

from __future__ import annotations

from tokenplane.admission.limits import LimitRule

PER_PERIOD = {"daily": "day", "weekly": "week", "monthly": "month", "fixed": "budget period"}


def money(micros: int, currency: str = "") -> str:
    """Integer micro-units as an amount: ``2.50 USD``, ``0.000100 USD``."""
    sign = "-" if micros < 0 else ""
    whole, frac = divmod(abs(micros), 1_000_000)
    digits = f"{frac:06d}"
    if digits.endswith("0000"):
        digits = digits[:2]
    text = f"{sign}{whole}.{digits}"
    return f"{text} {currency}" if currency else text


def per(rule: LimitRule) -> str:
    """``minute``, ``60.5 s``, ``month``... ; empty for gauges (held at once)."""
    if rule.kind == "window":
        if rule.window_s == 60:
            return "minute"
        if rule.window_s == 3600:
            return "hour"
        return f"{rule.window_s:g} s"
    if rule.kind == "calendar" and rule.period is not None:
        return PER_PERIOD[rule.period.kind]
    return ""


def quantity(n: int, unit: str, currency: str = "") -> str:
    """``1,200 total_tokens``, ``3 requests``, or money for ``cost_micros``."""
    if unit == "cost_micros":
        return money(n, currency)
    return f"{n:,} {unit}"
