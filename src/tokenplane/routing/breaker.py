"""A circuit breaker per replica: closed, open, half-open with probe budget."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from tokenplane.routing.endpoint import BREAKER_CLOSED, BREAKER_HALF_OPEN, BREAKER_OPEN


@dataclass(slots=True)
class Breaker:
    """Ejects a replica on consecutive failures or a high error rate.

    Closed: everything allowed; outcomes kept over ``window_s``. Opens on
    ``consecutive_failures`` failures in a row, or an error rate of at least
    ``error_rate`` over at least ``min_requests`` outcomes in the window.
    Open: nothing allowed until ``open_s`` has passed, then half-open. Half-open:
    at most ``probe_budget`` requests in flight as probes; ``probe_successes``
    successes close it, any failure opens it again (for twice as long, capped
    at ``max_open_s``). ``now`` is always passed in.
    """

    consecutive_failures: int = 5
    error_rate: float = 0.5
    min_requests: int = 20
    window_s: float = 10.0
    open_s: float = 5.0
    max_open_s: float = 60.0
    probe_budget: int = 1
    probe_successes: int = 2
    _state: str = field(default=BREAKER_CLOSED)
    _opened_at: float = 0.0
    _current_open_s: float = 0.0
    _streak: int = 0
    _outcomes: deque[tuple[float, bool]] = field(default_factory=deque)
    _probes_out: int = 0
    _probe_ok: int = 0

    def state(self, now: float) -> str:
        """The state at ``now`` (an open breaker turns half-open after its timeout)."""
        if self._state == BREAKER_OPEN and now - self._opened_at >= self._current_open_s:
            self._state = BREAKER_HALF_OPEN
            self._probes_out = 0
            self._probe_ok = 0
        return self._state

    def available(self, now: float) -> bool:
        """Whether :meth:`allow` would let a request through now (takes nothing)."""
        st = self.state(now)
        return st == BREAKER_CLOSED or (
            st == BREAKER_HALF_OPEN and self._probes_out < self.probe_budget
        )

    def release_probe(self, now: float) -> None:
        """Give back a probe slot whose request ended without an outcome (cancelled)."""
        if self.state(now) == BREAKER_HALF_OPEN:
            self._probes_out = max(0, self._probes_out - 1)

    def allow(self, now: float) -> bool:
        """Whether a request may go to this replica now (takes a probe slot if half-open)."""
        st = self.state(now)
        if st == BREAKER_CLOSED:
            return True
        if st == BREAKER_HALF_OPEN and self._probes_out < self.probe_budget:
            self._probes_out += 1
            return True
        return False

    def record_success(self, now: float) -> None:
        st = self.state(now)
        if st == BREAKER_HALF_OPEN:
            self._probes_out = max(0, self._probes_out - 1)
            self._probe_ok += 1
            if self._probe_ok >= self.probe_successes:
                self._close()
            return
        self._streak = 0
        self._push(now, True)

    def record_failure(self, now: float) -> None:
        st = self.state(now)
        if st == BREAKER_HALF_OPEN:
            self._open(now, min(self.max_open_s, max(self.open_s, self._current_open_s * 2)))
            return
        if st == BREAKER_OPEN:
            return
        self._streak += 1
        self._push(now, False)
        failures = sum(1 for _, ok in self._outcomes if not ok)
        n = len(self._outcomes)
        if self._streak >= self.consecutive_failures or (
            n >= self.min_requests and failures / n >= self.error_rate
        ):
            self._open(now, self.open_s)

    def _push(self, now: float, ok: bool) -> None:
        self._outcomes.append((now, ok))
        while self._outcomes and self._outcomes[0][0] < now - self.window_s:
            self._outcomes.popleft()

    def _open(self, now: float, duration: float) -> None:
        self._state = BREAKER_OPEN
        self._opened_at = now
        self._current_open_s = duration
        self._probes_out = 0
        self._probe_ok = 0

    def _close(self) -> None:
        self._state = BREAKER_CLOSED
        self._streak = 0
        self._outcomes.clear()
        self._current_open_s = 0.0
