"""Demand forecast one cold start ahead: a seasonal profile learned from history
times a short-term level/trend correction.

Model (additive in time, multiplicative in level):

* **Seasonal profile**: demand per ``bin_s`` bin (5 minutes by default) of the day:
  the median over the same weekday of the last ``weeks_kept`` weeks once
  ``min_weeks`` of them are known, else the median over the last ``days_kept`` days
  (a median, so one day's burst does not become the shape). Learned from
  the ledger's history (:meth:`DemandForecaster.learn`, per-minute points) and from
  what the pool then sees (:meth:`DemandForecaster.observe`: a day's minutes join
  the profile when the day is over).
* **Short-term correction**: Holt's linear (double exponential) smoothing with a
  damped trend on the ratio of the observed per-minute demand to the profile (on the
  demand itself while no profile exists): level ``alpha``, trend ``beta``, damping
  ``phi`` per minute ahead. A day running 20% above its profile forecasts 20% above
  the profile's next hour; a steepening ramp extrapolates, damped. **Robust**: each
  minute's surprise (the observation less the one-minute-ahead forecast) is clipped
  at ``huber_k`` times its running scale before it updates the state (Huber's psi,
  as in Gelper, Fried and Croux, *Robust forecasting with exponential and
  Holt-Winters smoothing*, J. Forecasting 2010): a 5-minute burst moves the level by
  a few clipped steps instead of tripling it, while a lasting shift is still followed
  within minutes (each minute moves the level by up to ``alpha x huber_k`` scales).

``forecast(t, horizon_s)`` = profile(t + horizon) x (level + trend x damped steps),
clamped at >= 0. The simulated day measures its error (docs/AUTOSCALING.md).
Time is seconds since the epoch (day 0 is a Thursday, as the Unix epoch); the
simulator's virtual clock is used as is.
"""

from __future__ import annotations

from collections.abc import Iterable

DAY_S = 86_400.0
WEEK_DAYS = 7


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


class DemandForecaster:
    """Learns per-minute demand and forecasts it ``horizon_s`` ahead."""

    def __init__(self, *, bin_s: float = 300.0, days_kept: int = 7, weeks_kept: int = 4,
                 min_weeks: int = 3, alpha: float = 0.3, beta: float = 0.1, phi: float = 0.9,
                 max_ratio: float = 4.0, huber_k: float = 2.5,
                 scale_alpha: float = 0.1) -> None:
        if bin_s <= 0 or DAY_S % bin_s:
            raise ValueError("bin_s must divide a day")
        if days_kept < 1 or weeks_kept < 1 or min_weeks < 1:
            raise ValueError("days_kept, weeks_kept and min_weeks must be >= 1")
        for v in (alpha, beta):
            if not 0.0 < v <= 1.0:
                raise ValueError("smoothing constants must be in (0, 1]")
        if not 0.0 < phi <= 1.0:
            raise ValueError("phi must be in (0, 1]")
        self.bin_s = bin_s
        self.bins = int(DAY_S // bin_s)
        self.days_kept = days_kept
        self.weeks_kept = weeks_kept
        self.min_weeks = min_weeks
        self.alpha = alpha
        self.beta = beta
        self.phi = phi
        self.max_ratio = max_ratio
        self.huber_k = huber_k
        self.scale_alpha = scale_alpha
        # the bin's demand on each of the last days / the last same weekdays
        self._by_dow: dict[tuple[int, int], list[float]] = {}
        self._by_bin: dict[int, list[float]] = {}
        # the minute being accumulated
        self._minute = -1
        self._sum = 0.0
        self._n = 0
        # the current day's minutes, folded into the profile once the day is over
        self._pending: dict[tuple[int, int], list[float]] = {}
        self._pending_day: int | None = None
        # Holt state on the ratio to the profile (or on demand with no profile)
        self.level: float | None = None
        self.trend = 0.0
        self._on_ratio = False
        # the running scale of the one-minute-ahead surprise (robust Holt), and how
        # many surprises stand behind it (no clipping before a few are known)
        self._scale = 0.0
        self._scale_n = 0

    # --- the profile -------------------------------------------------------------
    def _keys(self, t: float) -> tuple[int, int]:
        day = int(t // DAY_S)
        return (day + 3) % WEEK_DAYS, int((t - day * DAY_S) // self.bin_s)  # 0 = Monday

    def profile(self, t: float) -> float | None:
        """The seasonal profile's demand at ``t``: the median of the bin over the same
        weekday of the last weeks once ``min_weeks`` are known, else over the last
        days (None before any history). A median: one day's burst is not the shape."""
        dow, b = self._keys(t)
        weeks = self._by_dow.get((dow, b))
        if weeks is not None and len(weeks) >= self.min_weeks:
            return _median(weeks)
        days = self._by_bin.get(b)
        return _median(days) if days else None

    def _learn_point(self, t: float, value: float) -> None:
        dow, b = self._keys(t)
        weeks = self._by_dow.setdefault((dow, b), [])
        weeks.append(value)
        del weeks[:-self.weeks_kept]
        days = self._by_bin.setdefault(b, [])
        days.append(value)
        del days[:-self.days_kept]

    def learn(self, points: Iterable[tuple[float, float]]) -> int:
        """Learn the profile from history: ``(t, demand)`` per-minute points in time
        order (the ledger's per-minute demand). Points of one bin are averaged before
        they update the profile. Returns the number of points read."""
        n = 0
        cur: tuple[int, int] | None = None
        acc = 0.0
        cnt = 0
        t_cur = 0.0
        for t, v in points:
            n += 1
            day = int(t // DAY_S)
            key = (day, int((t - day * DAY_S) // self.bin_s))
            if key != cur:
                if cur is not None and cnt:
                    self._learn_point(t_cur, acc / cnt)
                cur, acc, cnt, t_cur = key, 0.0, 0, t
            acc += v
            cnt += 1
        if cur is not None and cnt:
            self._learn_point(t_cur, acc / cnt)
        return n

    # --- online ------------------------------------------------------------------
    def observe(self, t: float, demand: float) -> None:
        """Feed the demand seen at ``t`` (any cadence; averaged per minute). Each
        completed minute updates the Holt state; each completed bin the profile."""
        minute = int(t // 60)
        if minute != self._minute:
            if self._n:
                self._commit(self._minute * 60.0, self._sum / self._n)
            self._minute, self._sum, self._n = minute, 0.0, 0
        self._sum += demand
        self._n += 1

    def _commit(self, t: float, value: float) -> None:
        base = self.profile(t)
        on_ratio = base is not None and base > 0
        x = min(self.max_ratio, value / base) if on_ratio and base else value
        if self.level is None or on_ratio != self._on_ratio:
            self.level, self.trend, self._on_ratio = x, 0.0, on_ratio
            self._scale, self._scale_n = 0.0, 0
        else:
            prev = self.level
            x = self._cleaned(x, prev + self.phi * self.trend)
            self.level = self.alpha * x + (1 - self.alpha) * (prev + self.phi * self.trend)
            self.trend = (self.beta * (self.level - prev)
                          + (1 - self.beta) * self.phi * self.trend)
        self._remember(t, value)

    def _cleaned(self, x: float, predicted: float) -> float:
        """``x`` with its surprise clipped at ``huber_k`` running scales; the scale
        learns from the clipped surprise (a burst does not widen it)."""
        r = x - predicted
        if self._scale_n >= 5 and self._scale > 0:
            bound = self.huber_k * self._scale
            r = max(-bound, min(bound, r))
        self._scale_n += 1
        a = max(self.scale_alpha, 1.0 / self._scale_n)  # a plain mean at first
        self._scale = (1 - a) * self._scale + a * abs(r)
        return predicted + r

    def _remember(self, t: float, value: float) -> None:
        """Keep the minute for the profile; a finished day's bins are learned (today's
        demand shapes the days to come, not the ratio to today's own profile)."""
        day = int(t // DAY_S)
        if self._pending_day is not None and day != self._pending_day:
            for (d, b), (acc, n) in sorted(self._pending.items()):
                self._learn_point(d * DAY_S + b * self.bin_s, acc / n)
            self._pending.clear()
        self._pending_day = day
        key = (day, int((t - day * DAY_S) // self.bin_s))
        cur = self._pending.setdefault(key, [0.0, 0.0])
        cur[0] += value
        cur[1] += 1

    def forecast(self, t: float, horizon_s: float) -> float | None:
        """Demand expected at ``t + horizon_s`` (None with no history at all)."""
        steps = max(0.0, horizon_s / 60.0)
        damp = sum(self.phi ** k for k in range(1, int(steps) + 1)) if steps >= 1 else steps
        base = self.profile(t + horizon_s)
        if base is None:
            base = self.profile(t)
        if base is not None and self._on_ratio and self.level is not None:
            ratio = max(0.0, self.level + self.trend * damp)
            return max(0.0, base * min(self.max_ratio, ratio))
        if self.level is not None and not self._on_ratio:
            level = max(0.0, self.level + self.trend * damp)
            return max(level, base) if base is not None else level
        return base
