"""Token estimates for models with no known tokenizer, calibrated from reported usage.

Text is split into script classes by character ranges: ``cjk`` (Han, kana, Hangul, CJK and
full-width punctuation), ``code`` (lines dense in code punctuation such as ``{}[]();=<>``),
``latin`` (other ASCII) and ``other`` (any other script, emoji). The features are the
characters per class plus, inside latin and code, the word runs and symbol runs (English
and code token counts follow those more closely than characters). A model's prompt
tokens are modelled as ``sum(weight[f] * feature[f]) + bias`` (``bias`` absorbs
per-request framing). Each upstream-reported count refines the model's weights by
exponentially weighted least squares with a ridge prior toward the default
tokens-per-character rates, which separates the classes even when every request mixes
them. :meth:`Estimator.chars_per_token` turns the weights back into characters per token
per class at the recently seen word/symbol mix. The a-priori relative error of each
observation feeds :meth:`Estimator.error_stats`.

Plain object: no clock, no I/O.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

CLASSES = ("cjk", "latin", "code", "other")
# Features: characters per class, plus word and punctuation runs inside latin and code
# (English and code token counts follow words and symbol runs more closely than chars).
FEATURES = (
    "cjk",
    "latin",
    "code",
    "other",
    "latin_words",
    "latin_punct",
    "code_words",
    "code_punct",
)
# Prior tokens-per-character (English ~4 chars/token, code ~3.3, CJK ~1.3, other ~2);
# word / punctuation features start at zero weight.
DEFAULT_RATES: dict[str, float] = {"cjk": 0.75, "latin": 0.25, "code": 0.3, "other": 0.5}

_CJK = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_CODE_PUNCT = re.compile(r"[{}\[\]();=<>_/\\*#&|$`:+\-]")
_WORD = re.compile(r"[A-Za-z]+|[0-9]+")
_PUNCT = re.compile(r"[!-/:-@\[-`{-~]+")
CODE_DENSITY = 0.12
BIAS_RIDGE = 1.0


def text_features(text: str) -> dict[str, int]:
    """Characters per script class (code decided line by line), words and symbol runs."""
    feats = dict.fromkeys(FEATURES, 0)
    for line in text.splitlines(keepends=True):
        n = len(line)
        cjk = len(_CJK.findall(line))
        other = len(_NON_ASCII.findall(line)) - cjk
        ascii_chars = n - cjk - other
        stripped = len(line.strip())
        kind = "latin"
        if stripped and cjk == 0 and len(_CODE_PUNCT.findall(line)) >= CODE_DENSITY * stripped:
            kind = "code"
        feats[kind] += ascii_chars
        if ascii_chars:
            feats[kind + "_words"] += len(_WORD.findall(line))
            feats[kind + "_punct"] += len(_PUNCT.findall(line))
        feats["cjk"] += cjk
        feats["other"] += other
    return feats


@dataclass(frozen=True, slots=True)
class ErrorStats:
    """Recent a-priori relative errors |estimate - reported| / reported."""

    samples: int
    mean_abs_rel: float
    p90_abs_rel: float
    bias_rel: float


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve ``a x = b`` (symmetric positive definite) by Gaussian elimination with pivoting."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[piv] = m[piv], m[col]
        d = m[col][col]
        if d == 0.0:
            continue
        for r in range(col + 1, n):
            f = m[r][col] / d
            if f:
                row, src = m[r], m[col]
                for k in range(col, n + 1):
                    row[k] -= f * src[k]
    x = [0.0] * n
    for i in range(n - 1, -1, -1):
        d = m[i][i]
        acc = m[i][n] - sum(m[i][k] * x[k] for k in range(i + 1, n))
        x[i] = acc / d if d else 0.0
    return x


class _ModelFit:
    """Exponentially weighted least squares over the features plus a bias, with a ridge
    prior toward the default rates (stable where plain RLS drifts on collinear features)."""

    def __init__(self, rates: Mapping[str, float], prior_strength: float, window: int) -> None:
        self.theta0 = [rates.get(f, 0.0) for f in FEATURES] + [0.0]
        self.theta = self.theta0[:]
        dim = len(self.theta)
        self.ridge = [prior_strength] * len(FEATURES) + [BIAS_RIDGE]
        self.A = [[0.0] * dim for _ in range(dim)]
        self.b = [0.0] * dim
        self.mean_x = [0.0] * dim
        self.errors: deque[float] = deque(maxlen=window)
        self.observations = 0

    def predict(self, x: list[float]) -> float:
        return sum(t * v for t, v in zip(self.theta, x, strict=True))

    def update(self, x: list[float], y: float, lam: float) -> None:
        dim = len(x)
        A, b = self.A, self.b
        for i in range(dim):
            xi = x[i]
            row = A[i]
            for j in range(dim):
                row[j] = lam * row[j] + xi * x[j]
            b[i] = lam * b[i] + xi * y
        reg = [row[:] for row in A]
        for i in range(dim):
            reg[i][i] += self.ridge[i]
        rhs = [b[i] + self.ridge[i] * self.theta0[i] for i in range(dim)]
        self.theta = _solve(reg, rhs)
        self.mean_x = [0.98 * m + 0.02 * v for m, v in zip(self.mean_x, x, strict=True)]


class Estimator:
    """Per-model token estimates, calibrated online (see module docstring)."""

    def __init__(
        self,
        default_rates: Mapping[str, float] | None = None,
        forgetting: float = 0.995,
        prior_strength: float = 1e4,
        window: int = 200,
        max_models: int = 1024,
    ) -> None:
        self.default_rates = dict(DEFAULT_RATES if default_rates is None else default_rates)
        self.forgetting = forgetting
        self.prior_strength = prior_strength
        self.window = window
        self.max_models = max_models
        self._fits: dict[str, _ModelFit] = {}

    def _fit(self, model: str) -> _ModelFit:
        fit = self._fits.get(model)
        if fit is None:
            if len(self._fits) >= self.max_models:
                self._fits.pop(next(iter(self._fits)))
            fit = _ModelFit(self.default_rates, self.prior_strength, self.window)
            self._fits[model] = fit
        return fit

    @staticmethod
    def _vector(features: Mapping[str, int]) -> list[float]:
        return [float(features.get(f, 0)) for f in FEATURES] + [1.0]

    def estimate_features(self, model: str, features: Mapping[str, int]) -> int:
        fit = self._fits.get(model)
        x = self._vector(features)
        if fit is None:
            value = sum(self.default_rates.get(f, 0.0) * x[i] for i, f in enumerate(FEATURES))
        else:
            value = fit.predict(x)
        return max(0, round(value))

    def estimate(self, model: str, text: str) -> int:
        """Estimated tokens of ``text`` for ``model``."""
        return self.estimate_features(model, text_features(text))

    def observe(self, model: str, features: Mapping[str, int], reported_prompt_tokens: int) -> None:
        """Refine ``model``'s rates with one upstream-reported prompt count."""
        if reported_prompt_tokens <= 0:
            return
        fit = self._fit(model)
        x = self._vector(features)
        before = fit.predict(x)
        fit.errors.append((before - reported_prompt_tokens) / reported_prompt_tokens)
        fit.update(x, float(reported_prompt_tokens), self.forgetting)
        fit.observations += 1

    def weights(self, model: str) -> dict[str, float]:
        """Current tokens per unit of each feature (defaults for an unseen model)."""
        fit = self._fits.get(model)
        if fit is None:
            return {f: self.default_rates.get(f, 0.0) for f in FEATURES}
        return {f: fit.theta[i] for i, f in enumerate(FEATURES)}

    def chars_per_token(self, model: str) -> dict[str, float]:
        """Characters per token per class, at the class's recently seen word/symbol mix."""
        w = self.weights(model)
        fit = self._fits.get(model)
        out = {c: 1.0 / max(w[c], 1e-9) for c in CLASSES}
        if fit is None:
            return out
        for i, c in enumerate(CLASSES):
            chars = fit.mean_x[i]
            if chars <= 0.0:
                continue
            tokens = w[c] * chars
            if c in ("latin", "code"):
                for extra in ("_words", "_punct"):
                    tokens += w[c + extra] * fit.mean_x[FEATURES.index(c + extra)]
            out[c] = chars / tokens if tokens > 0 else float("inf")
        return out

    def error_stats(self, model: str) -> ErrorStats:
        fit = self._fits.get(model)
        if fit is None or not fit.errors:
            return ErrorStats(0, 0.0, 0.0, 0.0)
        errs = list(fit.errors)
        abs_sorted = sorted(abs(e) for e in errs)
        p90 = abs_sorted[min(len(abs_sorted) - 1, int(0.9 * len(abs_sorted)))]
        return ErrorStats(len(errs), sum(abs_sorted) / len(errs), p90, sum(errs) / len(errs))
