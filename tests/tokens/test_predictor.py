"""LengthPredictor: quantiles per key and bucket, back-off, caps, error."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenplane.tokens.predictor import LengthKey, LengthPredictor, bucket_of

K = LengthKey("acme", "chat", "qwen")


def test_buckets() -> None:
    assert [bucket_of(n) for n in (0, 1, 2, 3, 4, 5, 1024, 1025)] == [0, 0, 1, 2, 2, 3, 10, 11]


def test_default_then_quantiles() -> None:
    p = LengthPredictor(default=300, min_samples=10, window=100)
    assert p.predict(K, 500) == 300
    assert p.predict(K, 500, max_tokens=64) == 64
    for v in range(1, 101):
        p.observe(K, 500, v)
    assert p.quantile(K, 500, 0.5).level == "key+bucket"
    assert p.predict(K, 500) == 51
    assert p.predict(K, 500, q=0.9) == 91
    assert p.p50_p90(K, 500, max_tokens=80) == (51, 80)


def test_back_off_levels() -> None:
    p = LengthPredictor(default=7, min_samples=5)
    other_tenant = LengthKey("globex", "batch", "qwen")
    other_model = LengthKey("globex", "batch", "llama")
    for _ in range(5):
        p.observe(K, 100, 40)
    assert p.quantile(K, 100, 0.5).level == "key+bucket"
    assert p.quantile(K, 5000, 0.5).level == "key"
    assert p.quantile(other_tenant, 100, 0.5).level == "model+bucket"
    assert p.quantile(other_tenant, 5000, 0.5).level == "model"
    assert p.quantile(other_model, 100, 0.5).level == "bucket"
    assert p.quantile(other_model, 5000, 0.5).level == "global"
    assert p.predict(other_model, 5000) == 40
    assert LengthPredictor(default=7).quantile(K, 1, 0.5).level == "default"


def test_buckets_separate_short_and_long_prompts() -> None:
    p = LengthPredictor(min_samples=20)
    rng = random.Random(1)
    for _ in range(300):
        p.observe(K, rng.randint(10, 15), rng.randint(10, 20))
        p.observe(K, rng.randint(3000, 4000), rng.randint(500, 700))
    assert 10 <= p.predict(K, 12) <= 20
    assert 500 <= p.predict(K, 3500) <= 700


def test_window_tracks_recent_history() -> None:
    p = LengthPredictor(min_samples=5, window=50)
    for _ in range(200):
        p.observe(K, 64, 1000)
    for _ in range(50):
        p.observe(K, 64, 10)
    assert p.predict(K, 64, q=0.9) == 10


def test_error_is_mean_abs_relative_error() -> None:
    p = LengthPredictor(default=100, min_samples=1000)
    p.observe(K, 10, 50)  # predicted 100: error 1.0
    p.observe(K, 10, 200)  # predicted 100: error 0.5
    assert p.error() == pytest.approx(0.75)
    assert p.error_samples == 2
    assert LengthPredictor().error() == 0.0


def test_rejects_bad_configuration() -> None:
    with pytest.raises(ValueError):
        LengthPredictor(min_samples=0)


@given(
    st.lists(st.tuples(st.integers(0, 100_000), st.integers(0, 8192)), max_size=200),
    st.integers(0, 100_000),
    st.integers(0, 8192),
)
def test_predictions_are_capped_ordered_and_observed_values(
    history: list[tuple[int, int]], prompt: int, cap: int
) -> None:
    p = LengthPredictor(default=256, min_samples=3, window=32, max_windows=50)
    for prompt_tokens, out in history:
        p.observe(K, prompt_tokens, out)
    p50, p90 = p.p50_p90(K, prompt)
    assert p50 <= p90
    assert p.predict(K, prompt, max_tokens=cap) <= cap
    seen = {o for _, o in history} | {256}
    assert p50 in seen and p90 in seen
