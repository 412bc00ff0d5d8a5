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

    def __init__(self, denial: Denial, headers: dict[str, str]) -> None:
        super().__init__(429, denial.message, code=denial.code, headers=headers)
        self.denial = denial


class AdmissionUnavailable(GatewayError):
    """503 when the admission store is unreachable and the policy is fail-closed."""


def denial_error(denial: Denial, *, default_retry_s: float = 1.0,
                 extra_headers: dict[str, str] | None = None) -> AdmissionRefused:
    headers = {**(extra_headers or {}), **denial_headers(denial, default_retry_s)}
    return AdmissionRefused(denial, headers)


def unavailable_error(exc: StoreUnavailable, *, retry_after_s: int = 1) -> AdmissionUnavailable:
    return AdmissionUnavailable(
        503,
        "Admission control is unavailable (its shared store cannot be reached), so the "
        f"request was not admitted. Retry shortly. ({exc})",
        code="admission_unavailable",
        headers={"retry-after": str(max(1, retry_after_s))},
    )
