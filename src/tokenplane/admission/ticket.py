"""A request's reservation, kept on the request context (``ctx.ticket``) from the
admission stage until it is settled."""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.admission.outcomes import Grant


@dataclass(slots=True)
class Ticket:
    grant: Grant
    prompt_tokens: int
