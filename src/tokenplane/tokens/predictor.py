"""Output-length prediction from history, per (tenant, app, model) and prompt-length bucket.

Each key keeps, per log2 prompt-length bucket, a bounded window of the most recent output
lengths; quantiles (p50, p90, any q) are read from it. When a bucket has fewer than
``min_samples`` observations the prediction backs off, in order, to: the same key across
all buckets, the model in this bucket, the model across buckets, all models in this
bucket, everything; and finally to ``default``. Predictions are capped by ``max_tokens``.
The mean absolute relative error of the p50 prediction made before each observation is
kept over a recent window (a metric source). Plain object: no clock, no I/O.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict, deque
from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LengthKey:
    tenant: str
    app: str
    model: str


@dataclass(frozen=True, slots=True)
class Prediction:
    tokens: int
    level: str
    samples: int


def bucket_of(prompt_tokens: int) -> int:
    """log2 bucket: 0 for <= 1 token, else ``bit_length(prompt_tokens - 1)``."""
    return max(0, prompt_tokens - 1).bit_length()


class _Window:
    """The last ``size`` values, kept sorted as they come (bisect), so a quantile is a
    lookup and an observation costs a binary search and a short memmove."""

    __slots__ = ("_sorted", "values")

    def __init__(self, size: int) -> None:
        self.values: deque[int] = deque(maxlen=size)
        self._sorted: list[int] = []

    def add(self, v: int) -> None:
        if len(self.values) == self.values.maxlen:
            old = self.values[0]
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        self.values.append(v)
        bisect.insort(self._sorted, v)

    def quantile(self, q: float) -> int:
        s = self._sorted
        return s[min(len(s) - 1, int(q * len(s)))]


LEVELS = ("key+bucket", "key", "model+bucket", "model", "bucket", "global")


class LengthPredictor:
    def __init__(
        self,
        default: int = 256,
        min_samples: int = 20,
        window: int = 256,
        max_windows: int = 20_000,
        error_window: int = 500,
    ) -> None:
        if default < 0 or min_samples < 1 or window < 1:
            raise ValueError("default >= 0, min_samples >= 1 and window >= 1 required")
        self.default = default
        self.min_samples = min_samples
        self.window = window
        self.max_windows = max_windows
        self._windows: OrderedDict[Hashable, _Window] = OrderedDict()
        self._errors: deque[float] = deque(maxlen=error_window)

    def _chain(self, key: LengthKey, prompt_tokens: int) -> list[tuple[str, Hashable]]:
        b = bucket_of(prompt_tokens)
        return [
            ("key+bucket", ("k", key, b)),
            ("key", ("k", key)),
            ("model+bucket", ("m", key.model, b)),
            ("model", ("m", key.model)),
            ("bucket", ("g", b)),
            ("global", ("g",)),
        ]

    def quantile(self, key: LengthKey, prompt_tokens: int, q: float) -> Prediction:
        """The q-quantile of output length at the finest level with enough history."""
        for level, wkey in self._chain(key, prompt_tokens):
            w = self._windows.get(wkey)
            if w is not None and len(w.values) >= self.min_samples:
                return Prediction(w.quantile(q), level, len(w.values))
        return Prediction(self.default, "default", 0)

    def predict(
        self, key: LengthKey, prompt_tokens: int, max_tokens: int | None = None, q: float = 0.5
    ) -> int:
        """Predicted output tokens (the q-quantile, p50 by default), capped by max_tokens."""
        tokens = self.quantile(key, prompt_tokens, q).tokens
        return tokens if max_tokens is None else min(tokens, max_tokens)

    def p50_p90(
        self, key: LengthKey, prompt_tokens: int, max_tokens: int | None = None
    ) -> tuple[int, int]:
        return (
            self.predict(key, prompt_tokens, max_tokens, 0.5),
            self.predict(key, prompt_tokens, max_tokens, 0.9),
        )

    def observe(self, key: LengthKey, prompt_tokens: int, output_tokens: int) -> None:
        """Record a finished request's output length at every level."""
        before = self.predict(key, prompt_tokens)
        self._errors.append(abs(before - output_tokens) / max(output_tokens, 1))
        windows = self._windows
        for _, wkey in self._chain(key, prompt_tokens):
            w = windows.get(wkey)
            if w is None:
                w = _Window(self.window)
                windows[wkey] = w
            else:
                windows.move_to_end(wkey)
            w.add(output_tokens)
        while len(windows) > self.max_windows:
            windows.popitem(last=False)

    def error(self) -> float:
        """Mean absolute relative error of recent p50 predictions (0.0 with no history)."""
        return sum(self._errors) / len(self._errors) if self._errors else 0.0

    @property
    def error_samples(self) -> int:
        return len(self._errors)
