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
