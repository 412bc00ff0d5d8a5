"""A request's reservation, kept on the request context (``ctx.ticket``) from the
admission stage until it is settled."""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.admission.outcomes import Grant


@dataclass(slots=True)
class Ticket:
    grant: Grant
    prompt_tokens: int
    # the tenant whose clamped requests in flight this one is counted among (the
    # share ``clamp_max_tokens`` gives each), until it is settled
    in_flight: str | None = None
