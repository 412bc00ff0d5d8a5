"""OpenAI's rate-limit response headers from a grant's headroom or a denial."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tokenplane.admission.outcomes import Denial, Headroom


def _reset(seconds: float) -> str:
    """OpenAI's duration style: ``1s``, ``6m0s``, ``250ms``."""
    if seconds < 1:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    whole = math.ceil(seconds)
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


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


def denial_headers(denial: Denial, default_retry_s: float = 1.0) -> dict[str, str]:
    """``retry-after`` (whole seconds, at least 1) for a 429."""
    wait = denial.retry_after_s if denial.retry_after_s is not None else default_retry_s
    return {"retry-after": str(max(1, math.ceil(wait)))}
