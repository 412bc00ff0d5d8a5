"""OpenAI's rate-limit response headers from a grant's headroom or a denial."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from tokenplane.admission.money import money
from tokenplane.admission.outcomes import Denial, Headroom


def _reset(seconds: float) -> str:
    """OpenAI's duration style: ``1s``, ``6m0s``, ``250ms``; from an hour up
    ``1h0m0s``, from a day up ``24d0h0m0s`` (a budget's reset)."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours}h{minutes}m{secs}s"
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def header_unit(unit: str) -> str:
    """The suffix of a limit's ``x-ratelimit-*`` headers: OpenAI's ``requests`` and
    ``tokens``; ``budget`` for money (amounts in the currency, not micro-units)."""
    if unit == "requests":
        return "requests"
    return "budget" if unit == "cost_micros" else "tokens"


def _tightest(items: Sequence[Headroom], tokens: bool) -> Headroom | None:
    pick = [h for h in items if h.kind == "window"
            and (h.unit != "requests" if tokens else h.unit == "requests")]
    return min(pick, key=lambda h: (h.remaining, h.limit), default=None)


def ratelimit_headers(headroom: Sequence[Headroom]) -> dict[str, str]:
    """``x-ratelimit-*`` headers of the tightest request and token rate limits.

    Only rate windows (rpm / tpm) are reported; budgets and concurrency are not
    rate limits in OpenAI's sense. Empty when the chain has no rate limits.
    """
    out: dict[str, str] = {}
    for name, tokens in (("requests", False), ("tokens", True)):
        h = _tightest(headroom, tokens)
        if h is None:
            continue
        out[f"x-ratelimit-limit-{name}"] = str(h.limit)
        out[f"x-ratelimit-remaining-{name}"] = str(h.remaining)
        out[f"x-ratelimit-reset-{name}"] = _reset(h.reset_s)
    return out


def refusal_headers(denial: Denial) -> dict[str, str]:
    """``x-ratelimit-{limit,remaining,reset}-<unit>`` of the limit that refused: a rate
    window's or a calendar budget's alike (a budget's reset is the period's end)."""
    if denial.code == "concurrency_limit_exceeded":
        return {}
    name = header_unit(denial.unit)
    amount: Callable[[int], str] = money if name == "budget" else str
    return {f"x-ratelimit-limit-{name}": amount(denial.limit),
            f"x-ratelimit-remaining-{name}": amount(max(0, denial.remaining)),
            f"x-ratelimit-reset-{name}": _reset(denial.retry_after_s or 0.0)}


def denial_headers(denial: Denial, default_retry_s: float = 1.0) -> dict[str, str]:
    """``retry-after`` (whole seconds, at least 1) for a 429."""
    wait = denial.retry_after_s if denial.retry_after_s is not None else default_retry_s
    return {"retry-after": str(max(1, math.ceil(wait)))}
