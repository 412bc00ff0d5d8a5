"""Estimator: script classes, and online calibration against a hidden real tokenizer."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.estimator import Estimator, text_features
from tokenplane.tokens.registry import TokenizerRegistry

from .textgen import chinese, code, english, mixed


def test_text_features_classes() -> None:
    assert text_features("Hello world, plain prose.")["latin"] == 25
    zh = text_features("你好，世界。")
    assert zh["cjk"] == 6 and zh["latin"] == 0
    src = text_features("if (x[i] == 0) { y = f(x); }\nplain words here\n")
    assert src["code"] == len("if (x[i] == 0) { y = f(x); }\n")
    assert src["latin"] == len("plain words here\n")
    assert src["code_words"] > 0 and src["code_punct"] > 0
    assert text_features("🚀 ok")["other"] == 1
    assert sum(text_features("").values()) == 0


def test_unseen_model_uses_default_rates() -> None:
    est = Estimator()
    assert est.estimate("m", "a" * 400) == 100  # 4 chars per token for latin
    assert est.error_stats("m").samples == 0
    assert est.chars_per_token("m")["latin"] == pytest.approx(4.0)


Gen = Callable[[random.Random, int], str]


@pytest.mark.parametrize(
    ("name", "gen", "spec", "size"),
    [
        ("english", english, "tiktoken:cl100k_base", (100, 800)),
        ("code", code, "tiktoken:cl100k_base", (10, 80)),
        ("chinese", chinese, "qwen:qwen2.5-72b-instruct", (100, 800)),
        ("mixed", mixed, "qwen:qwen2.5-72b-instruct", (100, 800)),
    ],
)
def test_converges_to_reported_counts(
    registry: TokenizerRegistry, name: str, gen: Gen, spec: str, size: tuple[int, int]
) -> None:
    upstream: Tokenizer = registry.get(spec)
    rng = random.Random(5)
    est = Estimator(window=100)
    first_errors = []
    for i in range(400):
        text = gen(rng, rng.randint(*size))
        reported = upstream.count(text) + 7  # the upstream also counts some framing
        if i < 20:
            first_errors.append(abs(est.estimate("m", text) - reported) / reported)
        est.observe("m", text_features(text), reported)
    stats = est.error_stats("m")
    assert stats.samples == 100
    assert stats.mean_abs_rel < 0.03, (name, stats)
    assert stats.mean_abs_rel < sum(first_errors) / len(first_errors)
    held_out = [gen(rng, rng.randint(*size)) for _ in range(50)]
    errs = [
        abs(est.estimate("m", t) - upstream.count(t) - 7) / (upstream.count(t) + 7)
        for t in held_out
    ]
    assert sum(errs) / len(errs) < 0.03


def test_models_calibrate_independently_and_ignore_empty_reports() -> None:
    est = Estimator()
    feats = text_features("x" * 1000)
    for _ in range(50):
        est.observe("a", feats, 500)
        est.observe("b", feats, 125)
        est.observe("b", feats, 0)
    assert est.estimate("a", "x" * 1000) == pytest.approx(500, rel=0.01)
    assert est.estimate("b", "x" * 1000) == pytest.approx(125, rel=0.01)
    assert est.error_stats("b").samples == 50


def test_model_table_is_bounded() -> None:
    est = Estimator(max_models=3)
    for k in range(10):
        est.observe(f"m{k}", {"latin": 10}, 3)
    assert est.error_stats("m0").samples == 0 and est.error_stats("m9").samples == 1
