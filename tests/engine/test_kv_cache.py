"""KVCache block accounting: prefix hits, promotion, LRU eviction, pinned blocks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.engine.kv_cache import KVCache


def test_referenced_blocks_are_never_evicted() -> None:
    kv = KVCache(total_blocks=6, block_size=16)
    assert kv.allocate(3)
    for h in (1, 2, 3):
        assert kv.promote(h)
    assert kv.num_private == 0 and kv.num_cached == 3 and kv.num_used == 3
    # all three still referenced: only the 3 free blocks can be handed out
    assert not kv.allocate(4)
    assert kv.allocate(3)
    assert not kv.allocate(1)
    kv.release([1, 2, 3], 0)
    assert kv.num_evictable == 3 and kv.num_used == 3  # the 3 private blocks
    assert kv.allocate(1)  # evicts the LRU block: the tail (3) went in first
    assert kv.cached_prefix_blocks([1, 2, 3]) == 2


def test_match_and_acquire_pin_idle_blocks() -> None:
    kv = KVCache(total_blocks=4, block_size=16)
    kv.allocate(2)
    kv.promote(10)
    kv.promote(11)
    kv.release([10, 11], 0)
    assert kv.match([10, 11, 12], max_blocks=5) == (2, 2)
    assert kv.match([10, 11], max_blocks=1) == (1, 1)
    assert kv.match([99, 10], max_blocks=5) == (0, 0)
    kv.acquire([10, 11], 2)
    assert kv.num_evictable == 0 and kv.available() == 2
    assert not kv.promote(10)  # already cached: the caller's copy stays private


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["alloc", "promote", "release"]),
                              st.integers(min_value=0, max_value=6)), max_size=60))
def test_accounting_never_goes_negative(ops: list[tuple[str, int]]) -> None:
    total = 10
    kv = KVCache(total_blocks=total, block_size=16)
    held_private = 0
    held_cached: list[int] = []
    next_hash = 0
    for op, n in ops:
        if op == "alloc":
            ok = kv.allocate(n)
            assert ok == (n <= total - held_private - len(held_cached))
            if ok:
                held_private += n
        elif op == "promote" and held_private:
            next_hash += 1
            if kv.promote(next_hash):
                held_private -= 1
                held_cached.append(next_hash)
        elif op == "release":
            kv.release(held_cached, held_private)
            held_private = 0
            held_cached = []
        assert kv.num_free >= 0 and kv.num_evictable >= 0
        assert kv.num_used == held_private + len(held_cached)
        assert kv.available() == total - held_private - len(held_cached)
