"""The piece floor (``tokens/piece_floor.py``) is never above the exact count, for
every tiktoken pattern it knows, on random text mixing the characters its reading of
the patterns depends on (letters, digits, marks, punctuation, ASCII and other
whitespace, contractions, special-token text); and it is close on prose."""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.tokens.piece_floor import piece_floor
from tokenplane.tokens.registry import TiktokenTokenizer, TokenizerRegistry

SPECS = ["tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct"]
ALPHABET = (string.printable + "'''sStTdD  \n\n\x1c\x1f\x85\xa0\u2028\u3000é\u0301\u0903"
            "—…–²½٣一ſK中文ÅКя\U0001F600" + "<|endoftext|>")
PROSE = ("The gateway counts every prompt with the model's own tokenizer before it runs: "
         "budgets are reserved (at every scope) in one atomic step, and settled with the "
         "real usage once the answer is complete -- 3 times, 1,024 tokens, x86_64. ")


def _tok(spec: str) -> TiktokenTokenizer:
    tok = TokenizerRegistry().get(spec)
    assert isinstance(tok, TiktokenTokenizer)
    return tok


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=60))
def test_never_above_the_count(spec: str, text: str) -> None:
    tok = _tok(spec)
    assert 0 <= tok.token_floor(text) <= tok.count(text)


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=700), above=st.integers(-1, 200))
def test_above_decides_as_the_full_floor(spec: str, text: str, above: int) -> None:
    """``token_floor(text, above)`` (cheaper: ASCII text's pieces counted until over
    ``above``, else the runs floor when it is over) is a floor, over ``above`` exactly
    when the full one is."""
    tok = _tok(spec)
    full = tok.token_floor(text)
    got = tok.token_floor(text, above)
    assert got <= tok.count(text)
    assert (got > above) == (full > above)


@pytest.mark.parametrize("spec", SPECS)
def test_close_on_prose_and_sound_on_random_text(spec: str) -> None:
    tok = _tok(spec)
    text = PROSE * 5
    assert 0.75 * tok.count(text) <= tok.token_floor(text) <= tok.count(text)
    rng = random.Random(7)
    for _ in range(500):
        t = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 80)))
        assert tok.token_floor(t) <= tok.count(t), repr(t)


def test_only_the_listed_patterns() -> None:
    assert piece_floor(None) is None and piece_floor(r"\w+|\s+") is None
    assert _tok(SPECS[0]).token_floor("<|endoftext|> hello") == 0  # special-token text
