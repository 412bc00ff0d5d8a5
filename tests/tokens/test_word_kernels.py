"""The compiled word kernels (``tokens/_words.c``) equal their pure-Python definitions
(``tokens/word_kernels.py``) on random text: the later-word sum of the word memo, the
runs floor and the piece floor (with ``above``: over it exactly when the full count
is)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.tokens import word_kernels
from tokenplane.tokens.space_splits import runs_floor

pytestmark = pytest.mark.skipif(not word_kernels.COMPILED,
                                reason="the compiled kernels were not built here")

ALPHABET = "ab .,!'0129\t\n\r\x0b\x0c\x1c\x00éΣ一😀\u2028\u3000\ud800"
WORDS = ["a", "b", "ab", "a.", " ", "", "é", "x\n", "12"]


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=80), above=st.integers(-1, 30))
def test_runs_floor(text: str, above: int) -> None:
    from tokenplane.tokens import _words

    full = runs_floor(text)
    assert _words.runs_floor(text, -1) == full == word_kernels.runs_floor_py(text, -1)
    for floor in (_words.runs_floor, word_kernels.runs_floor_py):
        got = floor(text, above)
        assert got <= full and (got > above) == (full > above)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.sampled_from(WORDS) | st.text(alphabet=ALPHABET, max_size=5),
                      max_size=12),
       rest=st.dictionaries(st.sampled_from(WORDS), st.integers(0, 9)),
       last=st.dictionaries(st.sampled_from(WORDS), st.integers(0, 9)))
def test_later_sum(parts: list[str], rest: dict[str, int], last: dict[str, int]) -> None:
    from tokenplane.tokens import _words

    text = " ".join(parts)
    known = dict.fromkeys(WORDS, 1) | rest
    for memo in (rest, known):
        assert _words.later_sum(text, memo, last) == word_kernels.later_sum_py(
            text, memo, last)


@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet="aZ09 !.'\t\n\x00\x1c\x7f-", max_size=60),
       digits_one=st.booleans())
def test_piece_runs(text: str, digits_one: bool) -> None:
    from tokenplane.tokens import _words

    assert _words.piece_runs(text, digits_one) == word_kernels.piece_runs_py(text, digits_one)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="aZ09 !.'\t\n\x00-", max_size=1500),
       digits_one=st.booleans(), above=st.integers(-1, 400))
def test_piece_runs_above(text: str, digits_one: bool, above: int) -> None:
    """With ``above``, the compiled piece floor may stop early (texts past its 256-
    character blocks): never above the full one, and over ``above`` exactly when that
    one is."""
    from tokenplane.tokens import _words

    full = word_kernels.piece_runs_py(text, digits_one)
    assert _words.piece_runs(text, digits_one, -1) == full
    for floor in (_words.piece_runs, word_kernels.piece_runs_py):
        got = floor(text, digits_one, above)
        assert got <= full and (got > above) == (full > above)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=ALPHABET + "aZ-\u0301\u00b2\u0378", max_size=60),
       spec=st.sampled_from([(3, False), (1, False), (1, True)]))
def test_seen_piece_runs(text: str, spec: tuple[int, bool]) -> None:
    """The piece floor with its non-ASCII classes read in C equals the one mapping them
    in Python (a character unassigned in Python's table gives no floor either way)."""
    from tokenplane.tokens.piece_floor import _NON_ASCII, PieceFloor

    floor = PieceFloor(*spec)
    mapped = _NON_ASCII.sub(lambda m: floor._class(m.group()) or "\x00", text)
    want = 0 if "\x00" in mapped and not text.isascii() else word_kernels.piece_runs_py(
        mapped, spec[0] == 1)
    assert PieceFloor(*spec).tokens(text) == want
