"""The floor under a prompt's token count (tokens/char_floor.py) is never above the
count, for each tokenizer family and chat template, on text made to come as close
to it as a text can (the vocabulary's longest tokens, repeated), on NFC-merging text,
on special-token text, and on random conversations; tokenizers that are not
byte-level BPE give no floor."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.tokens import convgen
from tokenplane.config.schema import ModelConfig
from tokenplane.operations.chat import CHAT
from tokenplane.operations.completions import COMPLETIONS
from tokenplane.tokens.char_floor import CharFloor, char_floor, hf_char_floor
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.tokens.registry import TiktokenTokenizer, TokenizerRegistry

SPECS = {
    "tiktoken": ("cl100k_base", "openai"),
    "llama3": ("cl100k_base", "llama3"),
    "qwen": ("qwen:qwen2.5-72b-instruct", "qwen"),
    "deepseek": ("deepseek", "deepseek"),
}


@pytest.fixture(scope="module")
def counters(registry: TokenizerRegistry) -> ModelCounters:
    models = [ModelConfig(alias=name, tokenizer=spec, chat_template=family,
                          backends=[{"type": "sim"}])  # type: ignore[list-item]
              for name, (spec, family) in SPECS.items()]
    return ModelCounters(models, registry)


def longest_tokens(counters: ModelCounters, alias: str, n: int = 20) -> list[str]:
    """The texts of the vocabulary's longest tokens that decode to valid text."""
    tok = counters.tokenizer(alias)
    vocab = getattr(tok, "n_vocab", None)
    assert vocab
    ids = range(min(vocab, 100_000))
    texts = []
    for i in ids:
        try:
            t = tok.decode([i])
        except Exception:  # ids with no text (gaps in a vocabulary)
            continue
        if "\ufffd" not in t:
            texts.append(t)
    texts.sort(key=lambda t: len(t.encode()), reverse=True)
    return texts[:n]


@pytest.mark.parametrize("alias", list(SPECS))
def test_floor_never_above_the_count(counters: ModelCounters, alias: str) -> None:
    tok = counters.tokenizer(alias)
    floor = char_floor(tok)
    assert floor is not None and floor.per_token >= 16
    cases = [t * k for t in longest_tokens(counters, alias) for k in (1, 7, 50)]
    cases += ["e\u0301" * 5000, "\u1100\u1161\u11a8" * 3000, "a" * 100_000, " " * 70_000,
              "<|endoftext|>" * 500, "<|im_start|>" * 500, "<｜end▁of▁sentence｜>" * 300]
    for text in cases:
        assert floor.tokens(text) <= tok.count(text), (alias, text[:40])
    # near the floor: the longest token repeated is within a few per cent of it
    top = longest_tokens(counters, alias, 1)[0] * 100
    assert tok.count(top) <= 2 * floor.tokens(top)


@pytest.mark.parametrize("alias", list(SPECS))
def test_prompt_floor_never_above_the_count(counters: ModelCounters, alias: str) -> None:
    model = ModelConfig(alias=alias, backends=[{"type": "sim"}])  # type: ignore[list-item]
    rng = random.Random(13)
    long = longest_tokens(counters, alias, 5)
    for i in range(120):
        messages, tools = convgen.conversation(rng)
        if i % 4 == 0:  # content made of the longest tokens, with whitespace to trim
            messages.append({"role": "user", "content": "  \n" + rng.choice(long) * 40 + "\n "})
        body: dict[str, Any] = {"messages": messages, "tools": tools}
        floor = counters.floor(model, CHAT, body)
        assert floor is not None
        assert floor <= counters.count(model, CHAT, body).counts.prompt
    prompt = {"prompt": [long[0] * 30, [1, 2, 3], "hi"]}
    floor = counters.floor(model, COMPLETIONS, prompt)
    assert floor is not None and floor <= counters.count(model, COMPLETIONS, prompt).counts.prompt


def test_no_floor_without_a_byte_level_vocabulary(registry: TokenizerRegistry) -> None:
    bpe = {"model": {"type": "BPE", "vocab": {"ab": 0, "Ġabc": 1}},
           "pre_tokenizer": {"type": "ByteLevel"}, "normalizer": None,
           "added_tokens": [{"content": "<|longer_special|>"}]}
    assert hf_char_floor(bpe) == CharFloor(len("<|longer_special|>"))
    nfc = {**bpe, "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]}}
    assert hf_char_floor(nfc) == CharFloor(len("<|longer_special|>"), nfc=True)
    for spec in (
        {**bpe, "normalizer": {"type": "Lowercase"}},  # not proven: no floor
        {**bpe, "normalizer": {"type": "NFKC"}},  # compatibility forms fold
        {**bpe, "pre_tokenizer": {"type": "Metaspace"}},  # SentencePiece-like
        {**bpe, "model": {"type": "WordPiece", "vocab": {"a": 0}}},
        {**bpe, "model": {"type": "Unigram", "vocab": [["a", 0.0]]}},
    ):
        assert hf_char_floor(spec) is None
    qwen = registry.get("qwen:qwen2.5-72b-instruct")
    assert isinstance(qwen, TiktokenTokenizer) and qwen.char_floor().nfc


def test_estimated_alias_has_no_floor() -> None:
    m = ModelConfig(alias="x", tokenizer="estimate", backends=[{"type": "sim"}])  # type: ignore[list-item]
    counters = ModelCounters([m])
    assert counters.floor(m, CHAT, {"messages": [{"role": "user", "content": "hi"}]}) is None
