"""Counts of valid and bad events per time bucket, and the sums over any window.

``BucketTally`` is the live state of one SLI: fixed-width buckets (a minute by
default) keyed by their index since the epoch. Window sums come from prefix sums
over the sorted buckets, rebuilt from the first changed bucket (new events land in
the newest bucket, so that is almost always the last one): an evaluation costs a
bisection per window, not a walk over a 30-day window's 43,200 buckets. The ledger
feeds the same buckets at start, so a restart does not reset a window
(docs/SLO.md)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Tally:
    valid: int = 0
    bad: int = 0

    @property
    def good(self) -> int:
        return self.valid - self.bad

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.valid + other.valid, self.bad + other.bad)


class BucketTally:
    """Valid and bad counts in ``bucket_s``-wide buckets aligned to the epoch."""

    def __init__(self, bucket_s: float = 60.0) -> None:
        if bucket_s <= 0:
            raise ValueError("bucket_s must be positive")
        self.bucket_s = bucket_s
        self._keys: list[int] = []  # sorted bucket indices
        self._valid: dict[int, int] = {}
        self._bad: dict[int, int] = {}
        self._cum_valid: list[int] = []  # prefix sums over _keys, valid up to _clean
        self._cum_bad: list[int] = []
        self._clean = 0

    def bucket_of(self, ts: float) -> int:
        return int(ts // self.bucket_s)

    def add(self, ts: float, *, bad: bool, count: int = 1) -> None:
        self.add_bucket(self.bucket_of(ts), count, count if bad else 0)

    def add_bucket(self, bucket: int, valid: int, bad: int) -> None:
        """Add counts to one bucket (single events, or a whole bucket from the ledger);
        negative counts take back what was added before."""
        if not valid and not bad:
            return
        if bucket not in self._valid:
            if not self._keys or bucket > self._keys[-1]:
                self._keys.append(bucket)
            else:
                insort(self._keys, bucket)
            self._valid[bucket] = 0
            self._bad[bucket] = 0
        self._valid[bucket] += valid
        self._bad[bucket] += bad
        last = len(self._keys) - 1
        pos = last if bucket == self._keys[last] else bisect_left(self._keys, bucket)
        self._clean = min(self._clean, pos)

    def _prefix(self) -> None:
        keys, n = self._keys, len(self._keys)
        cv, cb = self._cum_valid, self._cum_bad
        del cv[self._clean:], cb[self._clean:]
        v = cv[-1] if cv else 0
        b = cb[-1] if cb else 0
        for k in keys[self._clean:]:
            v += self._valid[k]
            b += self._bad[k]
            cv.append(v)
            cb.append(b)
        self._clean = n

    def between(self, first: int, last: int) -> Tally:
        """Counts of buckets ``first`` to ``last``, both included."""
        if self._clean < len(self._keys):
            self._prefix()
        lo = bisect_left(self._keys, first)
        hi = bisect_right(self._keys, last)
        if hi <= lo:
            return Tally()
        valid = self._cum_valid[hi - 1] - (self._cum_valid[lo - 1] if lo else 0)
        bad = self._cum_bad[hi - 1] - (self._cum_bad[lo - 1] if lo else 0)
        return Tally(valid, bad)

    def window(self, now: float, span_s: float) -> Tally:
        """Counts of the bucket holding ``now`` and of the buckets after the one that
        holds ``now - span_s``: whole buckets, so the window is at most one bucket
        narrower than asked (the current bucket only, when ``span_s`` is shorter)."""
        last = self.bucket_of(now)
        first = self.bucket_of(now - span_s) + 1 if span_s >= self.bucket_s else last
        return self.between(first, last)

    def buckets(self, first: int, last: int) -> list[tuple[int, int, int]]:
        """``(bucket, valid, bad)`` of the buckets ``first`` to ``last`` that hold
        counts (both included), oldest first."""
        lo = bisect_left(self._keys, first)
        hi = bisect_right(self._keys, last)
        return [(k, self._valid[k], self._bad[k]) for k in self._keys[lo:hi]
                if self._valid[k] or self._bad[k]]

    def prune(self, before_ts: float) -> None:
        """Forget what a window reaching back to ``before_ts`` no longer sums: the bucket
        holding it and every older one."""
        cut = bisect_right(self._keys, self.bucket_of(before_ts))
        if not cut:
            return
        for k in self._keys[:cut]:
            del self._valid[k], self._bad[k]
        del self._keys[:cut]
        self._cum_valid.clear()
        self._cum_bad.clear()
        self._clean = 0

    def __len__(self) -> int:
        return len(self._keys)
