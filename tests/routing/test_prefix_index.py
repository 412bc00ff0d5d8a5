"""PrefixIndex: longest-prefix match and bounded LRU."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenplane.routing.prefix_index import PrefixIndex


def test_longest_prefix_match() -> None:
    idx = PrefixIndex(100)
    idx.record("a", [1, 2, 3])
    assert idx.match("a", [1, 2, 3, 4]) == 3
    assert idx.match("a", [1, 5, 3]) == 1
    assert idx.match("a", [9, 1, 2]) == 0
    assert idx.match("b", [1, 2]) == 0
    assert idx.match_all(["a", "b"], [1, 2]) == {"a": 2, "b": 0}


def test_lru_evicts_oldest_and_touch_refreshes() -> None:
    idx = PrefixIndex(3)
    idx.record("a", [1, 2, 3])
    idx.record("a", [1])  # touch 1: now 2 is the oldest
    idx.record("a", [4])
    assert idx.size("a") == 3
    assert idx.match("a", [1]) == 1
    assert idx.match("a", [2]) == 0
    idx.forget("a")
    assert idx.size("a") == 0


def test_rejects_bad_capacity() -> None:
    with pytest.raises(ValueError):
        PrefixIndex(0)


@given(
    cap=st.integers(1, 20),
    batches=st.lists(st.lists(st.integers(0, 30), max_size=10), max_size=20),
    probe=st.lists(st.integers(0, 30), max_size=10),
)
def test_bounded_and_match_is_a_prefix(
    cap: int, batches: list[list[int]], probe: list[int]
) -> None:
    idx = PrefixIndex(cap)
    for b in batches:
        idx.record("a", b)
        assert idx.size("a") <= cap
    n = idx.match("a", probe)
    assert 0 <= n <= len(probe)
    # every matched block is known, and the next one is not
    assert all(idx.match("a", [h]) == 1 for h in probe[:n])
    if n < len(probe):
        assert idx.match("a", [probe[n]]) == 0
