"""Prompt tokens split by source, fingerprints, plain prompts, images."""

from __future__ import annotations

from typing import Any

import pytest

from tokenplane.tokens.counter import TokenCounting
from tokenplane.tokens.messages import normalize
from tokenplane.tokens.segments import SegmentCache

SYSTEM = "You are the support assistant of ACME. Answer briefly. 用中文或英文回答。"
DOC = "ACME returns: 30 days, receipt required. 退货需要收据。"
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def _chat() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Can I return shoes?"},
        {"role": "assistant", "content": "Which order?"},
        {"role": "user", "name": "rag_results", "content": DOC},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Order 17."},
                {"type": "text", "text": DOC, "tokenplane_source": "context"},
            ],
        },
    ]


def test_classification() -> None:
    conv = normalize(
        [
            *_chat(),
            {"role": "tool", "content": "x"},
            {"role": "developer", "content": "d"},
            {"role": "assistant", "content": "a", "tokenplane_source": "context"},
        ]
    )
    assert [m.source for m in conv.messages] == [
        "system",
        "history",
        "history",
        "context",
        "user",
        "context",
        "system",
        "context",
    ]


@pytest.mark.parametrize("model", ["qwen2.5-72b-instruct", "deepseek-chat", "gpt-4"])
def test_sources_match_separately_counted_pieces(counting: TokenCounting, model: str) -> None:
    counter = counting.for_model(model)
    assert counter is not None
    base = counter.count(_chat()).counts
    with_tools = counter.count(_chat(), TOOLS).counts
    assert with_tools.tools > 0 and base.tools == 0
    assert with_tools.user == base.user and with_tools.history == base.history
    assert with_tools.context == base.context
    tok = counter.template.tokenizer
    # the RAG message and the context part each hold the document's tokens (+ framing)
    assert base.context >= 2 * tok.count(DOC)
    assert base.system >= tok.count(SYSTEM)
    assert base.history >= tok.count("Can I return shoes?") + tok.count("Which order?")
    assert base.user >= tok.count("Order 17.") + 1
    # growing the history moves tokens into history only
    longer = counter.count([_chat()[0], {"role": "user", "content": "earlier " * 50}, *_chat()[1:]])
    assert longer.counts.history > base.history
    assert (longer.counts.system, longer.counts.user, longer.counts.context) == (
        base.system,
        base.user,
        base.context,
    )


def test_system_fingerprint_repeats(counting: TokenCounting) -> None:
    counter = counting.for_model("qwen2.5-72b-instruct")
    assert counter is not None
    a = counter.count(_chat())
    b = counter.count([_chat()[0], {"role": "user", "content": "other question"}])
    c = counter.count([{"role": "system", "content": SYSTEM + "!"}, _chat()[1]])
    d = counter.count([_chat()[1]])
    assert a.system_fingerprint == b.system_fingerprint
    assert a.system_fingerprint != c.system_fingerprint
    assert d.system_fingerprint is None
    assert a.system_fingerprint is not None and len(a.system_fingerprint) == 16


def test_repeated_segments_hit_the_cache(counting: TokenCounting) -> None:
    cache = SegmentCache()
    local = TokenCounting(counting.registry, cache)
    counter = local.for_model("deepseek-chat")
    assert counter is not None
    first = counter.count(_chat(), TOOLS)
    assert not any(s.cached for s in first.segments)
    misses = cache.misses
    second = counter.count(
        [*_chat(), {"role": "assistant", "content": "ok"}, {"role": "user", "content": "thanks"}],
        TOOLS,
    )
    system_seg = second.segments[0]
    assert system_seg.source == "system" and system_seg.cached
    assert cache.misses == misses + 2  # only the two new turns were tokenized
    assert second.counts.system == first.counts.system


def test_images_are_estimated_and_flagged(counting: TokenCounting) -> None:
    local = TokenCounting(counting.registry, image_tokens=100)
    counter = local.for_model("qwen2.5-72b-instruct")
    assert counter is not None
    text_only = counter.count([{"role": "user", "content": [{"type": "text", "text": "what?"}]}])
    with_image = counter.count(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what?"},
                    {"type": "image_url", "image_url": {"url": "data:..."}},
                ],
            }
        ]
    )
    assert with_image.counts.user == text_only.counts.user + 100
    assert "image_estimate" in with_image.flags and not with_image.exact
    assert text_only.exact and not text_only.flags


def test_plain_prompts(counting: TokenCounting) -> None:
    counter = counting.for_model("gpt-3.5-turbo-instruct")
    assert counter is not None
    tok = counter.template.tokenizer
    assert counter.count_prompt("Say hi 你好").counts.user == tok.count("Say hi 你好")
    assert counter.count_prompt(["a b", "c"]).counts.user == tok.count("a b") + tok.count("c")
    assert counter.count_prompt([1, 2, 3]).counts.user == 3
    assert counter.count_prompt([[1, 2], [3]]).counts.user == 3
    assert counter.count_prompt("").counts.prompt == 0


def test_unknown_model_has_no_counter(counting: TokenCounting) -> None:
    assert counting.for_model("some-private-model") is None
    assert counting.for_model("some-private-model") is None
    small = TokenCounting(counting.registry, max_models=1)
    first = small.for_model("gpt-4")
    assert first is not None and small.for_model("gpt-4") is first
    assert small.for_model("unknown-a") is None and small.for_model("unknown-b") is None


@pytest.mark.parametrize(
    "bad",
    [
        [{"content": "no role"}],
        ["not a dict"],
        [{"role": "user", "content": 5}],
        [{"role": "user", "content": [{"type": "text"}]}],
        [{"role": "user", "content": [3]}],
        [{"role": "user", "content": {}}],
        [{"role": "assistant", "tool_calls": ["x"]}],
        [{"role": "assistant", "tool_calls": "x"}],
        [{"role": "assistant", "tool_calls": [{"function": 3}]}],
    ],
)
def test_malformed_messages_raise_value_error(counting: TokenCounting, bad: Any) -> None:
    counter = counting.for_model("gpt-4")
    assert counter is not None
    with pytest.raises(ValueError):
        counter.count(bad)
