"""Admission outcomes as OpenAI-shaped HTTP errors (429 refused, 503 store down)."""

from __future__ import annotations

from tokenplane.admission.headers import denial_headers
from tokenplane.admission.outcomes import Denial
from tokenplane.admission.store import StoreUnavailable
from tokenplane.api.errors import ApiError


def denial_error(denial: Denial, *, default_retry_s: float = 1.0,
                 extra_headers: dict[str, str] | None = None) -> ApiError:
    """429 naming the refusing scope and limit; ``code`` tells budget from rate."""
    headers = {**(extra_headers or {}), **denial_headers(denial, default_retry_s)}
    return ApiError(429, denial.message, code=denial.code, headers=headers)


def unavailable_error(exc: StoreUnavailable, *, retry_after_s: int = 1) -> ApiError:
    """503 when the admission store is unreachable and the policy is fail-closed."""
    return ApiError(
        503,
        "Admission control is unavailable (its shared store cannot be reached), so the "
        f"request was not admitted. Retry shortly. ({exc})",
        code="admission_unavailable",
        headers={"retry-after": str(max(1, retry_after_s))},
    )
