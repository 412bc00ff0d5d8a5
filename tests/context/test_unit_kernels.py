"""The compiled unit kernels (``context/_units.c``) against their pure-Python
definitions: a text's unit bytes, the MinHash analysis over the kernels' unit hashes
(``context/minhash.py``'s shingles and signature), the exact-duplicate key, the term
counts and the near-duplicate estimates; and the packer's decisions and accounting with
the kernels equal those without them (``TOKENPLANE_NO_KERNELS=1``, in a process of its
own), call by call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.context import unit_kernels
from tokenplane.context.analysis import _data, analyse, unit_hashes
from tokenplane.context.minhash import BINS, estimates, shingle_hashes, signature
from tokenplane.context.text import unit_bytes, unit_bytes_py, units

pytestmark = pytest.mark.skipif(not unit_kernels.COMPILED,
                                reason="the compiled kernels were not built here")

# every case and script the unit paths treat apart (see test_query_counts.py)
ALPHABET = ("abcxyzABC0129 _-.,!'\t\n\r\x0b\x00\x07\x1c\x1f\x7f\x85\xa0\u2028\u3000éÉ"
            "\u0301İıßΣσςµ—–×≤½²٣ſK一中ぁアㄱ한😀\ud800ǅⅫ")
WORDS = ["a", "and", "budget", "admission", "x" * 9, "Σίσυφος", "İstanbul", "é"]
TEXT = st.lists(st.sampled_from(WORDS) | st.text(alphabet=ALPHABET, max_size=12),
                max_size=40).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(text=TEXT)
def test_unit_bytes(text: str) -> None:
    assert unit_bytes(text) == unit_bytes_py(text)


@settings(max_examples=300, deadline=None)
@given(text=TEXT, other=TEXT)
def test_analysis(text: str, other: str) -> None:
    a = analyse(text)
    us = units(text)
    assert a.units.tolist() == unit_kernels.hash_units(us).tolist() == unit_hashes(
        text).tolist()
    assert len(a.units) == len(us)
    want = shingle_hashes(a.units)
    assert np.unique(a.shingles).tolist() == want.tolist()
    assert a.signature.tolist() == signature(want).tolist()
    b = analyse(other)
    assert (a.key == b.key) == (us == units(other))
    assert (a.key == analyse(_data(text).decode("utf-8", "surrogatepass")).key) or \
        unit_bytes(text) is None  # (the same units, read again)


@settings(max_examples=300, deadline=None)
@given(text=TEXT, query=st.lists(st.sampled_from(WORDS) | st.text(
    alphabet=ALPHABET, max_size=6), max_size=6))
def test_term_counts(text: str, query: list[str]) -> None:
    terms = sorted({u for q in query for u in units(q)})
    encoded = tuple(t.encode("utf-8", "surrogatepass") for t in terms)
    data = unit_bytes(text)
    if data is None:
        assert unit_kernels.query_counts([text], tuple(terms)) == [None]
        return
    counted = Counter(units(text))
    want = (len(units(text)), [counted[t] for t in terms])
    assert unit_kernels.term_counts(data, encoded) == want
    [found] = unit_kernels.query_counts([text], tuple(terms))
    assert found == (want[0], {t: n for t, n in zip(terms, want[1], strict=True) if n})


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(TEXT, min_size=2, max_size=6), floor=st.floats(0, 1))
def test_near(texts: list[str], floor: float) -> None:
    sigs = np.stack([analyse(t).signature for t in texts])
    for sig in sigs:
        want = np.flatnonzero(estimates(sig[None], sigs) >= floor).tolist()
        assert unit_kernels.near_rows(sig, sigs, floor) == want
    assert sigs.shape[1] == BINS


PACK = """
import json, random, sys
from tokenplane.context.analysis import AnalysisCache
from tokenplane.context.documents import Document, PackOptions
from tokenplane.context.packer import ContextPacker
from tokenplane.tokens.registry import TokenizerRegistry
words = sys.argv[1].split()
out = []
for spec in ("tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct"):
    tok = TokenizerRegistry().get(spec)
    rng = random.Random(7)
    for call in range(12):
        base = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 120))) + "."
                for _ in range(14)]
        docs = base + [t.replace("budget", "Budget") for t in base[:3]] + [
            t + " extra words here." for t in base[3:6]]
        scores = call % 2 == 0
        ds = [Document(f"d{i}", t, score=float(rng.randint(0, 5)) if scores else None)
              for i, t in enumerate(docs)]
        p = ContextPacker(cache=AnalysisCache()).pack(
            "How are Σίσυφος budgets reserved?", ds, rng.randint(50, 900), tok.count,
            PackOptions(order="original" if call % 3 else "relevance"),
            floor=tok.token_floor, defer=True,
            joins=tok if getattr(tok, "space_splits", False) else None)
        decision = [p.text, p.tokens, [[k.id, k.marker, k.tokens, k.truncated] for k in p.kept]]
        p.settle()
        out.append(decision + [sorted([d.id, d.reason, d.tokens, d.of or ""]
                                      for d in p.dropped), p.offered_tokens])
print(json.dumps(out))
"""


def test_packer_equal_without_kernels() -> None:
    words = ["budget", "tokens", "the", "a", "of", "reserve", "admission", "stream",
             "Σίσυφος", "İstanbul", "naïve", "日本語の文", "emoji😀", "don't", "1234", "x-y,",
             "end.", "Budget;", "(note)", "\u2028", "ça"]
    runs = []
    for off in ("", "1"):
        env = dict(os.environ, TOKENPLANE_NO_KERNELS=off)
        done = subprocess.run([sys.executable, "-c", PACK, " ".join(words)], env=env,
                              capture_output=True, text=True, check=True, timeout=240)
        runs.append(json.loads(done.stdout))
    assert len(runs[0]) == 24
    assert runs[0] == runs[1]
    assert any(d[3] and any(r[1] == "near_duplicate" for r in d[3]) for d in runs[0])


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=300).map(lambda b: bytes(b" ab"[x % 3] for x in b)),
       pad=st.sampled_from([0, 61, 62, 63, 64, 65, 127, 128]))
def test_units_across_blocks(data: bytes, pad: int) -> None:
    """The kernels find units 64 bytes at a time: every split of spaces and words,
    across the blocks' edges, gives what ``bytes.split`` gives."""
    from tokenplane.context import _units

    data = b"x" * pad + data
    us = data.split()
    terms = tuple(sorted(set(us)))
    counted = Counter(us)
    assert _units.term_counts(data, terms) == (len(us), [counted[t] for t in terms])
    assert _units.unit_hashes(data, 5) == b"".join(_units.unit_hashes(u, 5) for u in us)
