"""The per-unit loops of ranking and deduplication, compiled where they could be built
(``context/_units.c``, an optional extension built by ``pip install``,
docs/ARCHITECTURE.md "Compiled kernels"), else in Python (``context/analysis.py``,
``context/minhash.py``, ``context/query_counts.py`` hold those definitions). The two
give the same decisions (``tests/context/test_unit_kernels.py``);
``TOKENPLANE_NO_KERNELS=1`` in the environment leaves the compiled ones out (read when
this module is first imported).

The compiled unit hash is not Python's string hash: a seeded 64-bit hash of the unit's
UTF-8 bytes (:func:`seed`: Python's salted hash of a constant, so it changes per process
as Python's string hashes do). Every unit hash of a process comes from one of the two
(:func:`hash_units` for the query's units too), and only the equality of the hashes of
equal units within a process matters (``context/analysis.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tokenplane.tokens.word_kernels import NO_KERNELS

IntArray = npt.NDArray[np.int64]
U64Array = npt.NDArray[np.uint64]
_SEED = "tokenplane.context.unit_kernels"


def seed() -> int:
    """The compiled unit hash's seed (Python's hash of a constant string: salted per
    process unless ``PYTHONHASHSEED`` fixes it)."""
    return hash(_SEED)


try:
    if os.environ.get(NO_KERNELS):
        raise ImportError(NO_KERNELS)
    from tokenplane.context import _units as compiled
    COMPILED = True
except ImportError:  # not built (no compiler at install), or left out on purpose
    compiled = None  # type: ignore[assignment]
    COMPILED = False


def non_ascii_unit_bytes(text: str) -> bytes | None:
    """``text.unit_bytes`` of a text holding a non-ASCII character (compiled only): read
    as it is when ``str.lower`` would change none of its non-ASCII characters, else
    lower-cased first."""
    assert compiled is not None
    found = compiled.lower_unit_bytes(text, False)
    if found is False:
        found = compiled.lower_unit_bytes(text.lower(), True)
    assert not isinstance(found, bool)
    return found


def near_rows(sig: U64Array, kept: U64Array, floor: float) -> list[int]:
    """The rows of ``kept`` (signatures, one a row) that ``minhash.estimates`` puts at
    ``floor`` or more from ``sig`` (compiled only)."""
    assert compiled is not None
    return compiled.near(sig.tobytes(), kept.tobytes(), floor)


def unit_data(units: Sequence[str]) -> bytes:
    """Units as the compiled kernels read them (``text.unit_bytes``' form)."""
    return " ".join(units).encode("utf-8", "surrogatepass")


def hash_units(units: Sequence[str]) -> IntArray:
    """The hash of each of ``units``, as every unit hash of this process is made."""
    if compiled is not None:
        return np.frombuffer(compiled.unit_hashes(unit_data(units), seed()), np.int64)
    return np.fromiter(map(hash, units), np.int64, len(units))


def hash_unit_data(data: bytes) -> IntArray:
    """:func:`hash_units` of ``data``'s units (compiled only)."""
    assert compiled is not None
    return np.frombuffer(compiled.unit_hashes(data, seed()), np.int64)


def analyse_data(data: bytes) -> tuple[IntArray, U64Array, U64Array, int]:
    """The unit hashes, the sorted distinct shingle hashes, the MinHash signature and
    the exact-duplicate key of ``data``'s units (compiled only: ``context/minhash.py``'s
    definitions over these unit hashes)."""
    assert compiled is not None
    units, shingles, sig, key = compiled.analyse(data, seed())
    return (np.frombuffer(units, np.int64), np.frombuffer(shingles, np.uint64),
            np.frombuffer(sig, np.uint64), key)


def term_counts(data: bytes, terms: tuple[bytes, ...]) -> tuple[int, list[int]]:
    """The number of ``data``'s units and the occurrences of each of ``terms`` (distinct)
    among them (compiled only: ``context/query_counts.py``'s definition)."""
    assert compiled is not None
    return compiled.term_counts(data, terms)



def query_counts(texts: list[str], terms: tuple[str, ...]
                 ) -> list[tuple[int, dict[str, int]] | None]:
    """For each text, its number of units and how often each of ``terms`` (distinct)
    occurs among them, those that do (``context/query_counts.py``); None for a text
    holding a Chinese or Japanese character (compiled only)."""
    assert compiled is not None
    return compiled.query_counts(
        texts, terms, tuple(t.encode("utf-8", "surrogatepass") for t in terms))
