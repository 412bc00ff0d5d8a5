"""Weighted traffic splits for canary and A/B: by header, tenant or percentage."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tokenplane.routing.endpoint import RouteRequest


def stable_fraction(key: str, salt: str = "") -> float:
    """A deterministic value in [0, 1) from a string (same key, same value, any process)."""
    digest = hashlib.blake2b(f"{salt}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


@dataclass(frozen=True, slots=True)
class SplitRule:
    """Which model version a request goes to.

    Checked in order: a header pin (``header`` name -> value -> version), a
    tenant pin, then a weighted percentage split keyed on the session id
    (``by="session"``, falling back to the request id) or the request id.
    Weights need not sum to 1; they are normalised.
    """

    weights: Sequence[tuple[str, float]]
    by: str = "request"
    header: str | None = None
    header_versions: Mapping[str, str] = field(default_factory=dict)
    tenant_versions: Mapping[str, str] = field(default_factory=dict)
    salt: str = ""

    def __post_init__(self) -> None:
        if not self.weights:
            raise ValueError("a split needs at least one weighted version")
        if any(w < 0 for _, w in self.weights) or sum(w for _, w in self.weights) <= 0:
            raise ValueError("split weights must be non-negative with a positive sum")
        if self.by not in ("request", "session"):
            raise ValueError("by must be 'request' or 'session'")

    def choose(self, req: RouteRequest) -> str:
        """The model version for this request."""
        if self.header is not None:
            value = req.keys.get(self.header)
            if value is not None and value in self.header_versions:
                return self.header_versions[value]
        if req.tenant in self.tenant_versions:
            return self.tenant_versions[req.tenant]
        key = req.session_id if self.by == "session" and req.session_id else req.request_id
        x = stable_fraction(key, self.salt) * sum(w for _, w in self.weights)
        acc = 0.0
        for version, w in self.weights:
            acc += w
            if x < acc:
                return version
        return self.weights[-1][0]
