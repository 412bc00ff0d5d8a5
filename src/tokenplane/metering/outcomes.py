"""What became of a request, in the four kinds a person reads apart: refused by one of
our limits or budgets, a client's mistake, a failure of the gateway or the upstream,
and a client that left. The ledger's rollups count each (``usage_rollups``, migration
12); the console, ``tokenplane usage`` and the reports show them under these names."""

from __future__ import annotations

OUTCOMES: tuple[str, ...] = ("limited", "client_errors", "failures", "cancelled")

# the model the ledger records for a request that never named one it could serve (a
# client error): never a row of "top models", whose requests the client errors count
UNRESOLVED_MODEL = "unknown"

# what each is called where a person reads it
OUTCOME_LABELS: dict[str, str] = {
    "limited": "refused by a limit or budget (429)",
    "client_errors": "client errors (4xx)",
    "failures": "gateway or upstream failures (5xx, timeouts)",
    "cancelled": "cancelled (the client left)",
}


def outcome_of(status: str, http_status: int, ran: bool) -> str | None:
    """The kind of a request that did not end ``ok`` (None for one that did).

    ``ran``: an upstream was called. A 429 the gateway answered itself is a limit's
    or a budget's refusal; an upstream's 429 is the upstream failing us. Any other
    4xx is the client's mistake (bad input, an unknown model, a wrong content type,
    a guard's refusal of what it sent); everything else that is not ``ok`` failed."""
    if status == "ok":
        return None
    if status == "cancelled" or http_status == 499:
        return "cancelled"
    if http_status == 429 and not ran:
        return "limited"
    if 400 <= http_status < 500 and http_status != 429:
        return "client_errors"
    return "failures"
