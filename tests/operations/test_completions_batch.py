"""The completions operation's batch of prompts: its checks, its count (the sum, and the
longest for the window), its prefix segments for routing, the prompts it says it holds."""

from __future__ import annotations

from typing import Any

import pytest

from tokenplane.compose.config_file import validate_config
from tokenplane.errors import GatewayError
from tokenplane.operations.completions import COMPLETIONS
from tokenplane.operations.prefix import text_segments
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.tokens.prompt_batch import MAX_CHOICES, MAX_PROMPTS, prompt_batch, prompt_list

CFG = validate_config({
    "models": [
        {"alias": "exact", "tokenizer": "cl100k_base",
         "backends": [{"id": "s", "type": "sim"}]},
        {"alias": "guess", "tokenizer": "estimate", "backends": [{"id": "g", "type": "sim"}]},
    ],
    "tenants": [{"name": "t"}],
})


def _body(prompt: Any, **kw: Any) -> dict[str, Any]:
    return {"model": "exact", "prompt": prompt, **kw}


@pytest.mark.parametrize("prompt", [
    "one", ["one"], ["one", "two"], [1, 2, 3], [[1, 2]], [[1, 2], [3]],
    ["x"] * MAX_PROMPTS,
])
def test_accepted(prompt: Any) -> None:
    COMPLETIONS.validate(_body(prompt))


@pytest.mark.parametrize(("prompt", "extra", "param"), [
    ([], {}, "prompt"),
    (["a", 1], {}, "prompt[1]"),
    ([1, ["a"]], {}, "prompt[1]"),
    ([[1], "a"], {}, "prompt[1]"),
    ([[]], {}, "prompt[0]"),
    (["a"] * (MAX_PROMPTS + 1), {}, "prompt"),
    (["a"] * 2, {"n": MAX_CHOICES // 2 + 1}, "n"),
    ([[1, True]], {}, "prompt[0][1]"),
    ({"a": 1}, {}, "prompt"),
])
def test_refused_naming_the_field(prompt: Any, extra: dict[str, Any], param: str) -> None:
    with pytest.raises(GatewayError) as info:
        COMPLETIONS.validate(_body(prompt, **extra))
    assert info.value.status == 400 and info.value.param == param


def test_batch_shapes() -> None:
    assert prompt_batch("a") is None and prompt_batch([1, 2]) is None
    assert prompt_batch(["a"]) == ["a"] and prompt_batch([[1]]) == [[1]]
    assert prompt_list([1, 2]) == [[1, 2]] and prompt_list("a") == ["a"]
    assert COMPLETIONS.prompts(_body("a")) == 1 and COMPLETIONS.prompts(_body([1, 2])) == 1
    assert COMPLETIONS.prompts(_body(["a", "b", "c"])) == 3


def test_counted_as_the_sum_with_the_longest() -> None:
    counters = ModelCounters(CFG.models)
    exact, guess = CFG.models
    tok = counters.tokenizer("exact")
    texts = ["Once upon a time", "The quick brown fox jumps over the lazy dog"]
    res = counters.count(exact, COMPLETIONS, _body(texts))
    assert res.counts.prompt == res.counts.user == sum(tok.count(t) for t in texts)
    assert res.longest == max(tok.count(t) for t in texts)
    one = counters.count(exact, COMPLETIONS, _body(texts[:1]))
    assert one.counts.prompt == tok.count(texts[0]) and one.longest is None
    ids = counters.count(exact, COMPLETIONS, _body([[1, 2, 3], [4]]))
    assert (ids.counts.prompt, ids.longest) == (4, 3)
    assert counters.count(exact, COMPLETIONS, _body([1, 2, 3])).longest is None
    est = counters.count(guess, COMPLETIONS, _body(texts))
    assert est.longest is not None and 0 < est.longest < est.counts.prompt
    # the floor of a batch is its longest prompt's floor (what must fit the window)
    floor = counters.floor(exact, COMPLETIONS, _body(["x" * 4000, "y"]))
    assert floor is not None and 0 < floor <= tok.count("x" * 4000)


def test_prefix_segments_per_prompt() -> None:
    long = "a" * 700
    assert COMPLETIONS.prefix_segments(_body(long)) == text_segments(long)
    assert COMPLETIONS.prefix_segments(_body([long])) == text_segments(long)
    segs = COMPLETIONS.prefix_segments(_body([long, "b" * 100]))
    # each prompt sliced on its own: the first prompt's slices lead, unchanged
    assert segs == text_segments(long) + text_segments("b" * 100)
