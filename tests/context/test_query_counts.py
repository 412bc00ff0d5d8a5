"""BM25's view of new texts worked out all at once (``context/query_counts.py``) equals
counting their units (``text.units``), and so the BM25 scores equal those from each
text's units counted or hashed; the fast unit paths equal the unit expression."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.context.analysis import unit_hashes
from tokenplane.context.bm25 import bm25_scores
from tokenplane.context.query_counts import query_counts
from tokenplane.context.text import UNIT_RE, units

# letters of every case and script the fast paths treat apart, digits, marks, the
# punctuation and whitespace str.split and the unit expression disagree on
# (\x1c-\x1f), control characters, CJK, emoji, surrogates
ALPHABET = ("abcxyzABC0129 _-.,!'\t\n\r\x0b\x00\x07\x1c\x1f\x7f\x85\xa0\u2028\u3000éÉ"
            "\u0301İıßΣσςµ—–×≤½²٣ſK一中ぁアㄱ한😀\ud800")
WORDS = ["a", "and", "budget", "budgets", "admission", "admissions", "tokenplane",
         "reservation", "reserve", "x" * 9, "ab" * 4, "é", "σ", "ab\x00"]


def _texts() -> st.SearchStrategy[list[str]]:
    word = st.sampled_from(WORDS) | st.text(alphabet=ALPHABET, max_size=12)
    sep = st.sampled_from([" ", "  ", ", ", "\n", "-", "\x1c", ""])
    text = st.lists(st.tuples(word, sep), max_size=30).map(
        lambda ws: "".join(w + s for w, s in ws))
    return st.lists(text, max_size=8)


@settings(max_examples=300, deadline=None)
@given(texts=_texts(), query=st.lists(st.sampled_from(WORDS) | st.text(
    alphabet=ALPHABET, max_size=10), max_size=8).map(" ".join))
def test_query_counts_equal_counting_units(texts: list[str], query: str) -> None:
    qs = units(query)
    for text, got in zip(texts, query_counts(texts, qs), strict=True):
        if got is None:  # Chinese or Japanese: ranked by unit hashes
            assert any(len(u) == 1 and "\u3040" <= u <= "\ufaff" for u in units(text))
            continue
        us = Counter(units(text))
        assert got.length == us.total()
        assert {u: got[u] for u in qs} == {u: us[u] for u in qs}


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=ALPHABET, max_size=40))
def test_units_fast_paths_equal_the_expression(text: str) -> None:
    assert units(text) == UNIT_RE.findall(text.lower()) or text.isascii()


def test_bm25_scores_are_unchanged_on_real_chunks() -> None:
    """Chunks of the project's documents ranked from their query counts score exactly
    as ranked from their units counted (``Counter``) or hashed."""
    corpus = " ".join(p.read_text(encoding="utf-8") for p in
                      sorted((Path(__file__).resolve().parents[2] / "docs").glob("*.md")))
    rng = random.Random(16)
    for query in ["How does admission reserve tokens and settle budgets when a stream "
                  "ends early?", "预算怎么结算？ budget", "x-tokenplane-citations header",
                  "p50 p95 ms µs"]:
        texts = [corpus[a:a + rng.randint(0, 3000)] for a in
                 (rng.randrange(len(corpus)) for _ in range(50))]
        fresh = query_counts(texts, units(query))
        by_counts = bm25_scores([f if f is not None else unit_hashes(t)
                                 for f, t in zip(fresh, texts, strict=True)], query)
        by_units = bm25_scores([Counter(units(t)) if f is not None else unit_hashes(t)
                                for f, t in zip(fresh, texts, strict=True)], query)
        by_hashes = bm25_scores([unit_hashes(t) for t in texts], query)
        assert by_counts == by_units == by_hashes
