from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache, fingerprint


def test_hits_misses_and_lru(registry: TokenizerRegistry) -> None:
    tok = registry.get("tiktoken:cl100k_base")
    cache = SegmentCache(max_entries=2)
    assert cache.count(tok, "alpha beta") == tok.count("alpha beta")
    assert (cache.hits, cache.misses) == (0, 1)
    cache.count(tok, "alpha beta")
    assert (cache.hits, cache.misses) == (1, 1)
    cache.count(tok, "gamma")
    cache.count(tok, "alpha beta")  # refresh: "gamma" is now least recent
    cache.count(tok, "delta")  # evicts "gamma"
    assert len(cache) == 2 and cache.evictions == 1
    cache.count(tok, "alpha beta")
    assert cache.hits == 3
    cache.count(tok, "gamma")
    assert cache.misses == 4
    assert 0.0 < cache.hit_ratio < 1.0


def test_bounded_by_characters(registry: TokenizerRegistry) -> None:
    tok = registry.get("tiktoken:cl100k_base")
    cache = SegmentCache(max_entries=100, max_chars=25)
    for word in ("a" * 10, "b" * 10, "c" * 10):
        cache.count(tok, word)
    assert cache.chars <= 25 and len(cache) == 2 and cache.evictions == 1


def test_keys_include_the_tokenizer(registry: TokenizerRegistry) -> None:
    cache = SegmentCache()
    cl = registry.get("tiktoken:cl100k_base")
    qw = registry.get("qwen:qwen2.5-72b-instruct")
    text = "人工智能大语言模型"
    assert cache.count(cl, text) == cl.count(text)
    assert cache.count(qw, text) == qw.count(text)
    assert cl.count(text) != qw.count(text)


def test_invalid_bounds() -> None:
    with pytest.raises(ValueError):
        SegmentCache(max_entries=0)


def test_fingerprint_is_stable() -> None:
    assert fingerprint("abc") == "ba7816bf8f01cfea"
    cache = SegmentCache()
    assert cache.fingerprint("abc") == cache.fingerprint("abc") == fingerprint("abc")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), min_size=1, max_size=5))
def test_joint_shares_are_exact_and_non_negative(
    registry: TokenizerRegistry, parts: list[str]
) -> None:
    tok = registry.get("tiktoken:cl100k_base")
    entry, _ = SegmentCache().measure(tok, tuple(parts))
    assert entry.total == tok.count("".join(parts))
    assert all(n >= 0 for n in entry.counts)
    assert len(entry.counts) == len(parts)


def test_lookup_matches_measure_one_text_at_a_time(registry: TokenizerRegistry) -> None:
    tok = registry.get("qwen:qwen2.5-72b-instruct")
    batched, single = SegmentCache(), SegmentCache()
    batches = [
        ["a b", "人工智能", "a b", "", "人工智能", "naïve"],
        ["a b", "new one", "新的", "新的", "x" * 50],
        [],
        ["new one", "a b"],
    ]
    for texts in batches:
        counts, hits = batched.lookup(tok, texts)
        expected = [single.measure(tok, (t,)) for t in texts]
        assert counts == [e.total for e, _ in expected] == [tok.count(t) for t in texts]
        assert hits == [hit for _, hit in expected]
        assert (batched.hits, batched.misses, batched.evictions, batched.chars, len(batched)) == (
            single.hits, single.misses, single.evictions, single.chars, len(single)
        )
    # lookup and measure share entries
    assert batched.measure(tok, ("a b",))[1] and batched.count(tok, "a b") == tok.count("a b")
    small = SegmentCache(max_entries=3, max_chars=40)
    for texts in batches:
        assert small.lookup(tok, texts)[0] == [tok.count(t) for t in texts]
        assert len(small) <= 3 and (small.chars <= 40 or len(small) == 1)
    assert small.evictions > 0


def test_lookup_counts_new_texts_in_one_call() -> None:
    class Counting:
        name = "fake"

        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def encode(self, text: str) -> list[int]:
            return [0] * len(text.split())

        def decode(self, ids: list[int]) -> str:
            return ""

        def count(self, text: str) -> int:
            self.calls.append([text])
            return len(text.split())

        def count_many(self, texts: list[str]) -> list[int]:
            self.calls.append(list(texts))
            return [len(t.split()) for t in texts]

    tok = Counting()
    cache = SegmentCache()
    counts, hits = cache.lookup(tok, ["a b", "c", "a b", "d e f"])
    assert (counts, hits) == ([2, 1, 2, 3], [False, False, True, False])
    assert tok.calls == [["a b", "c", "d e f"]]
    assert cache.lookup(tok, ["c", "g"]) == ([1, 1], [True, False])
    assert tok.calls[-1] == ["g"]
    assert (cache.hits, cache.misses) == (2, 4)
