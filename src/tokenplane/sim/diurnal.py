"""A day of traffic: a documented time-of-day rate curve and a workload resampled
from a trace under it.

The curve (multiples of the night trough, piecewise linear between the knots of
``DIURNAL_KNOTS``, hours of the day):

    00:00 1.6 -> 02:00 1.2 -> 04:00 1.0 (trough) -> 06:00 1.2 -> 07:00 2.0 -> 08:00 3.2
    -> 09:00 4.5 -> 10:00 5.4 -> 11:00 6.0 (peak) -> 12:00 5.6 -> 13:00 5.4 (lunch)
    -> 14:00 6.0 (peak) -> 15:00 5.8 -> 16:00 5.0 -> 17:00 4.2 -> 18:00 3.4 -> 20:00 2.6
    -> 22:00 2.0 -> 24:00 1.6

(a business day: the morning ramp 06:00-11:00, two peaks around the lunch dip, an
evening tail; mean 3.2x the trough, 53% of the peak) plus two short bursts that
triple the rate for ``BURST_S`` (5 minutes): at 03:30 (on the trough: 3.0x) and
22:30 (on the evening tail: ~5.6x). The bursts are not in
the history the forecaster learns from (history days have their bursts elsewhere):
a forecast cannot foresee them; the morning ramp it can.

Requests: a Poisson process whose rate follows the curve, each request's sizes
(prompt, output, prefix blocks) drawn from the trace: the curve is the only rate
variation, so what the forecast gets wrong is the curve's bursts and the noise.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tokenplane.sim.traces import TraceRequest

DAY_S = 86_400.0
BURST_S = 300.0
DIURNAL_KNOTS: tuple[tuple[float, float], ...] = (
    (0.0, 1.6), (2.0, 1.2), (4.0, 1.0), (6.0, 1.2), (7.0, 2.0), (8.0, 3.2), (9.0, 4.5),
    (10.0, 5.4), (11.0, 6.0), (12.0, 5.6), (13.0, 5.4), (14.0, 6.0), (15.0, 5.8),
    (16.0, 5.0), (17.0, 4.2), (18.0, 3.4), (20.0, 2.6), (22.0, 2.0), (24.0, 1.6),
)
DIURNAL_BURSTS: tuple[float, ...] = (3.5 * 3600.0, 22.5 * 3600.0)  # burst starts (s)
BURST_FACTOR = 3.0


@dataclass(frozen=True, slots=True)
class RateCurve:
    """Requests per second over a day: ``peak_rps`` x knots(t) / max(knots), times
    ``BURST_FACTOR`` inside a burst."""

    peak_rps: float
    knots: tuple[tuple[float, float], ...] = DIURNAL_KNOTS
    bursts: tuple[float, ...] = DIURNAL_BURSTS
    burst_s: float = BURST_S
    burst_factor: float = BURST_FACTOR

    def base(self, t: float) -> float:
        """The seasonal rate at ``t`` (no bursts)."""
        h = (t % DAY_S) / 3600.0
        top = max(v for _, v in self.knots)
        for (h0, v0), (h1, v1) in zip(self.knots, self.knots[1:], strict=False):
            if h0 <= h <= h1:
                v = v0 + (v1 - v0) * ((h - h0) / (h1 - h0) if h1 > h0 else 0.0)
                return self.peak_rps * v / top
        return self.peak_rps * self.knots[-1][1] / top

    def in_burst(self, t: float) -> bool:
        s = t % DAY_S
        return any(b <= s < b + self.burst_s for b in self.bursts)

    def rate(self, t: float) -> float:
        return self.base(t) * (self.burst_factor if self.in_burst(t) else 1.0)

    def mean_rps(self, step_s: float = 60.0) -> float:
        n = int(DAY_S // step_s)
        return sum(self.rate((k + 0.5) * step_s) for k in range(n)) / n


def resample_trace(trace: Sequence[TraceRequest], rate: Callable[[float], float],
                   duration_s: float = DAY_S, seed: int = 0) -> list[TraceRequest]:
    """Requests over ``[0, duration_s)`` arriving as a Poisson process whose rate
    follows ``rate(t)`` (requests per second, e.g. :meth:`RateCurve.rate`), each
    one's sizes (prompt, output, prefix blocks) drawn from the trace (seeded)."""
    if not trace:
        raise ValueError("empty trace")
    # cumulative expected arrivals on a 1-second grid; unit-rate Poisson points in
    # that space mapped back through it
    step = 1.0
    grid = [0.0]
    for k in range(math.ceil(duration_s / step)):
        grid.append(grid[-1] + rate((k + 0.5) * step) * step)
    total = grid[-1]
    rng = random.Random(seed)
    out: list[TraceRequest] = []
    c = rng.expovariate(1.0)
    while c < total:
        k = bisect.bisect_right(grid, c) - 1
        frac = (c - grid[k]) / max(1e-12, grid[k + 1] - grid[k])
        r = trace[rng.randrange(len(trace))]
        out.append(TraceRequest(arrival=(k + frac) * step, prompt_tokens=r.prompt_tokens,
                                output_tokens=r.output_tokens, block_hashes=r.block_hashes))
        c += rng.expovariate(1.0)
    return out


def history_points(curve: RateCurve, work_per_request: float, days: int = 7,
                   seed: int = 1) -> list[tuple[float, float]]:
    """Per-minute demand (engine-seconds per second) of ``days`` earlier days: the
    curve's seasonal rate times the mean work of a request, each day at its own
    level (+-10%), each minute with +-5% noise, and two bursts per day at random
    times (so the forecaster learns the day's shape, not the test day's bursts).
    Times are negative: day -1 ends at 0."""
    rng = random.Random(seed)
    pts: list[tuple[float, float]] = []
    for d in range(days, 0, -1):
        level = rng.uniform(0.9, 1.1)
        bursts = [rng.uniform(0, DAY_S - BURST_S) for _ in range(2)]
        for m in range(int(DAY_S // 60)):
            s = m * 60.0 + 30.0
            v = curve.base(s) * level * rng.uniform(0.95, 1.05)
            if any(b <= s < b + BURST_S for b in bursts):
                v *= curve.burst_factor
            pts.append((s - d * DAY_S, v * work_per_request))
    return pts
