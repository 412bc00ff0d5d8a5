"""The three plugin kinds of a routing profile, and the state they share."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Protocol

from tokenplane.routing.endpoint import EndpointState, RouteRequest
from tokenplane.routing.prefix_index import PrefixIndex


class Filter(Protocol):
    """Drops replicas that must not get the request."""

    def filter(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> list[EndpointState]: ...


class Scorer(Protocol):
    """Scores each candidate replica in [0, 1]; higher is better."""

    def score(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, float]: ...


class Picker(Protocol):
    """Chooses one replica from the weighted total scores."""

    def pick(
        self,
        req: RouteRequest,
        scored: Mapping[str, float],
        endpoints: Sequence[EndpointState],
    ) -> str: ...


class RoutingContext:
    """State learned from the gateway's own routing, shared by the plugins.

    Holds the prefix index, the session table (session id -> replica, bounded
    LRU) and a seeded random source for tie breaks. ``record`` is called once
    per routing decision by the profile.
    """

    def __init__(
        self,
        *,
        block_size: int = 16,
        prefix_capacity_blocks: int = 100_000,
        max_sessions: int = 100_000,
        seed: int = 0,
    ) -> None:
        self.block_size = block_size
        self.prefix_index = PrefixIndex(prefix_capacity_blocks)
        self.sessions: OrderedDict[str, str] = OrderedDict()
        self.max_sessions = max_sessions
        self.rng = random.Random(seed)
        self._match_req: RouteRequest | None = None
        self._match_eps: tuple[str, ...] = ()
        self._match_val: dict[str, int] = {}
        self.last_matched_blocks = 0

    def prefix_matches(
        self, req: RouteRequest, endpoints: Sequence[EndpointState]
    ) -> dict[str, int]:
        """Matched blocks per replica, memoised for the request being routed."""
        eps = tuple(e.id for e in endpoints)
        if req is not self._match_req or eps != self._match_eps:
            self._match_val = self.prefix_index.match_all(eps, req.block_hashes)
            self._match_req = req
            self._match_eps = eps
        return self._match_val

    def record(self, req: RouteRequest, endpoint_id: str) -> None:
        """Learn from a decision: the replica now holds this prefix and session.

        ``last_matched_blocks`` keeps how much of the prefix the index believed
        the replica held before this decision (the gateway's cached estimate).
        """
        if req.block_hashes:
            self.last_matched_blocks = self.prefix_index.match(endpoint_id, req.block_hashes)
            self.prefix_index.record(endpoint_id, req.block_hashes)
        else:
            self.last_matched_blocks = 0
        self._match_req = None
        if req.session_id is not None:
            self.sessions[req.session_id] = endpoint_id
            self.sessions.move_to_end(req.session_id)
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)


def clamp01(x: float) -> float:
    """Clamp a score into [0, 1]."""
    if x != x:  # NaN
        return 0.0
    return 0.0 if x < 0.0 else 1.0 if x > 1.0 else x


def inverse_minmax(values: Mapping[str, float]) -> dict[str, float]:
    """1 for the smallest value, 0 for the largest, linear between; all 1 if equal."""
    if not values:
        return {}
    lo = min(values.values())
    hi = max(values.values())
    if hi <= lo:
        return {k: 1.0 for k in values}
    span = hi - lo
    return {k: clamp01((hi - v) / span) for k, v in values.items()}
