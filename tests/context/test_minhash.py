"""The MinHash pieces (``context/minhash.py``) against their definitions, written out
plainly: shingle hashes are the distinct splitmix64 values of each 3-unit polynomial,
sorted; a signature keeps each bin's smallest value; an estimate is the share of equal
minima among the bins not empty in both."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.context.minhash import BINS, estimates, shingle_hashes, signature

M64 = (1 << 64) - 1
P1, P2 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F


def _mix(h: int) -> int:
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) & M64
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) & M64
    return h ^ (h >> 31)


def _shingles(units: list[int]) -> list[int]:
    u = [x & M64 for x in units]
    if len(u) >= 3:
        raw = [(a * P1 + b * P2 + c) & M64 for a, b, c in zip(u, u[1:], u[2:], strict=False)]
    elif u:
        h = 0
        for x in u:
            h = (h * P1 + x) & M64
        raw = [h]
    else:
        raw = []
    return sorted({_mix(h) for h in raw})


def _signature(shingles: list[int]) -> list[int]:
    sig = [M64] * BINS
    for h in shingles:
        b = h >> 57
        sig[b] = min(sig[b], h & ((1 << 57) - 1))
    return sig


units_st = st.lists(st.integers(-(1 << 63), (1 << 63) - 1) | st.sampled_from([0, 1, -1, 7]),
                    max_size=60)


@settings(max_examples=300, deadline=None)
@given(units=units_st)
def test_shingles_and_signature_are_their_definitions(units: list[int]) -> None:
    sh = shingle_hashes(np.asarray(units, np.int64))
    assert sh.tolist() == _shingles(units)
    assert signature(sh).tolist() == _signature(_shingles(units))


@settings(max_examples=200, deadline=None)
@given(a=units_st, b=units_st)
def test_estimates_are_the_share_of_equal_minima(a: list[int], b: list[int]) -> None:
    sa, sb = _signature(_shingles(a)), _signature(_shingles(b))
    used = [i for i in range(BINS) if not (sa[i] == M64 and sb[i] == M64)]
    want = sum(sa[i] == sb[i] for i in used) / max(len(used), 1)
    got = estimates(np.asarray(sa, np.uint64), np.asarray(sb, np.uint64))
    assert float(got) == want
