"""Rate and concurrency limits per tool, kept per replica: a sliding log of call times
per (tool, who) and a count of calls in flight per tool. Time comes in as ``now``."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RateRule:
    calls: int
    per_s: float


@dataclass
class RateLog:
    """The start times of the calls of the last ``per_s`` seconds, per subject."""

    _times: dict[tuple[str, str], deque[float]] = field(default_factory=dict)

    def take(self, subject: tuple[str, str], rule: RateRule, now: float) -> float | None:
        """Count one call now; or, over the rule, the seconds until one is allowed
        (the call is then not counted)."""
        times = self._times.get(subject)
        if times is None:
            times = self._times[subject] = deque()
        horizon = now - rule.per_s
        while times and times[0] <= horizon:
            times.popleft()
        if len(times) >= rule.calls:
            return max(0.0, times[0] - horizon)
        times.append(now)
        return None

    def forget_idle(self, now: float, longest_s: float) -> None:
        """Drop the subjects with no call in ``longest_s`` (the longest window)."""
        for k in [k for k, t in self._times.items() if not t or t[-1] <= now - longest_s]:
            del self._times[k]


@dataclass
class InFlight:
    """Calls in flight per tool."""

    _count: dict[str, int] = field(default_factory=dict)

    def enter(self, tool: str, limit: int) -> bool:
        n = self._count.get(tool, 0)
        if n >= limit:
            return False
        self._count[tool] = n + 1
        return True

    def leave(self, tool: str) -> None:
        n = self._count.get(tool, 0) - 1
        if n > 0:
            self._count[tool] = n
        else:
            self._count.pop(tool, None)

    def count(self, tool: str) -> int:
        return self._count.get(tool, 0)
