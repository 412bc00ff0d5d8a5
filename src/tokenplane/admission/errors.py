"""Admission's refusals as domain errors (429 refused by a limit, 503 store down);
the HTTP edge renders them as OpenAI's envelope like any :class:`GatewayError`."""

from __future__ import annotations

from tokenplane.admission.headers import denial_headers
from tokenplane.admission.outcomes import Denial
from tokenplane.admission.stores.base import StoreUnavailable
from tokenplane.errors import GatewayError


class AdmissionRefused(GatewayError):
    """A limit refused the request: 429 naming the scope and limit; ``code`` tells a
    budget from a rate, ``headers`` carry ``retry-after`` and ``x-ratelimit-*``."""

    def __init__(self, denial: Denial, headers: dict[str, str], currency: str = "",
                 now: float | None = None) -> None:
        super().__init__(429, denial.describe(currency, now), code=denial.code,
                         headers=headers)
        self.denial = denial


class RequestExceedsLimit(GatewayError):
    """400: the request alone asks more than a limit allows, so it can never pass as
    sent (``request_exceeds_limit``; no ``retry-after``: waiting cannot help)."""

    def __init__(self, denial: Denial, currency: str = "") -> None:
        super().__init__(400, denial.describe(currency), code="request_exceeds_limit")
        self.denial = denial


class AdmissionUnavailable(GatewayError):
    """503 when the admission store is unreachable and the policy is fail-closed."""


def denial_error(denial: Denial, *, default_retry_s: float = 1.0,
                 extra_headers: dict[str, str] | None = None,
                 currency: str = "", now: float | None = None,
                 ) -> AdmissionRefused | RequestExceedsLimit:
    """429 for a limit the request may pass later; 400 for one it never can. ``now``:
    a budget's message says when it resets."""
    if denial.never:
        return RequestExceedsLimit(denial, currency)
    headers = {**(extra_headers or {}), **denial_headers(denial, default_retry_s)}
    return AdmissionRefused(denial, headers, currency, now)


def unavailable_error(exc: StoreUnavailable, *, retry_after_s: int = 1) -> AdmissionUnavailable:
    return AdmissionUnavailable(
        503,
        "Admission control is unavailable (its shared store cannot be reached), so the "
        f"request was not admitted. Retry shortly. ({exc})",
        code="admission_unavailable",
        headers={"retry-after": str(max(1, retry_after_s))},
    )
