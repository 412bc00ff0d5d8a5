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
from typing import NamedTuple


class LengthKey(NamedTuple):
    """Whose requests (a tuple: hashed and compared in C, cheap as a dict key)."""

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


class _Links:
    """A fallback chain's window keys and their windows (None: no window yet)."""

    __slots__ = ("windows", "wkeys")

    def __init__(self, wkeys: tuple[Hashable, ...], windows: list[_Window | None]) -> None:
        self.wkeys = wkeys
        self.windows = windows


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
        self._links_memo: dict[tuple[str, str, str, int], _Links] = {}

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

    def _links(self, key: LengthKey, prompt_tokens: int) -> _Links:
        """The request's fallback chain with its windows, memoised per (key, bucket)
        while no window is created or evicted (both drop every memo)."""
        memo_key = (*key, bucket_of(prompt_tokens))
        links = self._links_memo.get(memo_key)
        if links is None:
            wkeys = tuple(wkey for _, wkey in self._chain(key, prompt_tokens))
            links = _Links(wkeys, [self._windows.get(k) for k in wkeys])
            if len(self._links_memo) >= self.max_windows:
                self._links_memo.clear()
            self._links_memo[memo_key] = links
        return links

    def _found(self, links: _Links) -> tuple[int, _Window | None]:
        """(level index, window) of the finest level with enough history."""
        for i, w in enumerate(links.windows):
            if w is not None and len(w.values) >= self.min_samples:
                return i, w
        return -1, None

    def quantile(self, key: LengthKey, prompt_tokens: int, q: float) -> Prediction:
        """The q-quantile of output length at the finest level with enough history."""
        i, w = self._found(self._links(key, prompt_tokens))
        if w is None:
            return Prediction(self.default, "default", 0)
        return Prediction(w.quantile(q), LEVELS[i], len(w.values))

    def predict(
        self, key: LengthKey, prompt_tokens: int, max_tokens: int | None = None, q: float = 0.5
    ) -> int:
        """Predicted output tokens (the q-quantile, p50 by default), capped by max_tokens."""
        _, w = self._found(self._links(key, prompt_tokens))
        tokens = self.default if w is None else w.quantile(q)
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
        links = self._links(key, prompt_tokens)
        _, found = self._found(links)
        before = self.default if found is None else found.quantile(0.5)
        self._errors.append(abs(before - output_tokens) / max(output_tokens, 1))
        windows = self._windows
        changed = False
        for wkey, w in zip(links.wkeys, links.windows, strict=True):
            if w is None:
                w = _Window(self.window)
                windows[wkey] = w
                changed = True
            else:
                windows.move_to_end(wkey)
            w.add(output_tokens)
        while len(windows) > self.max_windows:
            windows.popitem(last=False)
            changed = True
        if changed:
            self._links_memo.clear()

    def error(self) -> float:
        """Mean absolute relative error of recent p50 predictions (0.0 with no history)."""
        return sum(self._errors) / len(self._errors) if self._errors else 0.0

    @property
    def error_samples(self) -> int:
        return len(self._errors)
