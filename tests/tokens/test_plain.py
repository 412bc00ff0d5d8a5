"""The plain-request path of ChatCounter against the general path (pieces), every family."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tokenplane.tokens.counter import ChatCounter, CountResult
from tokenplane.tokens.plain import plain_shape
from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache
from tokenplane.tokens.template_base import ChatTemplate
from tokenplane.tokens.templates import make_template

from .convgen import TOOLS, conversation
from .textgen import GENERATORS

# (family, tokenizer spec): every family over its own vocabulary, and families over a
# vocabulary that lacks their special tokens (framing written as several text ids)
CASES = [
    ("openai", "tiktoken:cl100k_base"),
    ("llama3", "tiktoken:cl100k_base"),
    ("chatml", "qwen:qwen2.5-72b-instruct"),
    ("qwen", "qwen:qwen2.5-72b-instruct"),
    ("qwen3", "qwen:qwen3.6-27b"),
    ("deepseek", "deepseek"),
    ("chatml", "tiktoken:cl100k_base"),
    ("qwen", "deepseek"),
    ("deepseek", "tiktoken:cl100k_base"),
    ("openai", "qwen:qwen2.5-72b-instruct"),
    ("llama3", "deepseek"),
]
ROLES = ("system", "user", "assistant", "developer", "user", "assistant", "user", "", "critic")
EDGE_TEXTS = (
    "", " ", "\n", "\n\n", "  padded  ", "user", "assistant", "system", "\n\nx", "x\n",
    "<|im_start|>user\nfake turn<|im_end|>", "<|endoftext|>", "<｜User｜>hi", "<think>t</think>",
    "e\u0301 caf\u00e9 naïve", "😀🚀", "人工智能", "it's 're 'll", "x" * 5000, "word " * 1200,
    "tab\tand\r\nreturn", "\u0338", "> \u0338",
)


def _text(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return rng.choice(EDGE_TEXTS)
    gen = rng.choice(list(GENERATORS.values()))
    return gen(rng, rng.randint(1, 30))


def plain_conversation(rng: random.Random) -> list[dict[str, Any]]:
    msgs = []
    if rng.random() < 0.6:
        msgs.append({"role": "system", "content": _text(rng)})
    for _ in range(rng.randint(0, 6)):
        msgs.append({"role": rng.choice(ROLES), "content": _text(rng)})
    if rng.random() < 0.8:
        msgs.append({"role": "user", "content": _text(rng)})
    return msgs


def _key(result: CountResult) -> tuple[Any, ...]:
    segments = [(s.source, s.tokens, s.chars) for s in result.segments]
    return (result.counts.as_dict(), segments, result.system_fingerprint, result.exact,
            result.flags)


def _template(registry: TokenizerRegistry, family: str, spec: str) -> ChatTemplate:
    return make_template(family, registry.get(spec))


@pytest.mark.parametrize(("family", "spec"), CASES)
def test_plain_path_equals_general_path(
    registry: TokenizerRegistry, family: str, spec: str
) -> None:
    template = _template(registry, family, spec)
    fast = ChatCounter(template, SegmentCache(max_entries=256))
    general = ChatCounter(template, SegmentCache(max_entries=256))
    assert fast.plain is not None
    rng = random.Random(f"{family}/{spec}")
    convs = [plain_conversation(rng) for _ in range(150)]
    convs += [[], [{"role": "user", "content": ""}], [{"role": "system", "content": "s"}],
              [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}],
              [{"role": "assistant", "content": "a"}], [{"role": "", "content": ""}]]
    for msgs in convs:
        for _ in range(2):  # cold, then warm
            plain = fast.count_plain(fast.plain, msgs)
            assert plain is not None
            expected = general.count_pieces(msgs)
            assert _key(plain) == _key(expected), msgs
            assert plain.counts.prompt == len(template.encode(msgs))
            assert fast.count(msgs) is not None
    assert fast.cache.evictions > 0


@pytest.mark.parametrize(("family", "spec"), CASES[:6])
def test_cache_statistics_match(registry: TokenizerRegistry, family: str, spec: str) -> None:
    """Misses are the distinct new texts; repeated turns are hits, as in the general path."""
    template = _template(registry, family, spec)
    fast = ChatCounter(template, SegmentCache())
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]
    first = fast.count(msgs)
    misses = fast.cache.misses
    assert misses >= 1 and not all(s.cached for s in first.segments)
    again = fast.count(msgs)
    assert fast.cache.misses == misses and all(s.cached for s in again.segments)
    longer = [*msgs, {"role": "assistant", "content": "hi!"}, {"role": "user", "content": "hi!"},
              {"role": "user", "content": "more"}]
    fast.count(longer)
    general = ChatCounter(template, SegmentCache())
    general.count_pieces(msgs)
    before = general.cache.misses
    general.count_pieces(longer)
    assert fast.cache.misses - misses == general.cache.misses - before


def _not_plain(rng: random.Random) -> tuple[list[Any], Any]:
    msgs, tools = conversation(rng)
    kind = rng.randrange(6)
    if kind == 0:
        tools = tools or TOOLS
    elif kind == 1:
        msgs[-1] = {**msgs[-1], "name": "alice"}
    elif kind == 2:
        msgs.append({"role": "tool", "content": "42"})
    elif kind == 3:
        msgs.append({"role": "user", "content": [{"type": "text", "text": "part"}]})
    elif kind == 4:
        msgs.append({"role": "user", "content": "x", "tokenplane_source": "context"})
    else:
        msgs.append({"role": "function", "content": "f"})
    return msgs, tools


@pytest.mark.parametrize(("family", "spec"), CASES[:6])
def test_other_requests_take_the_general_path(
    registry: TokenizerRegistry, family: str, spec: str
) -> None:
    template = _template(registry, family, spec)
    counter = ChatCounter(template, SegmentCache())
    shape = counter.plain
    assert shape is not None
    rng = random.Random(17)
    for _ in range(60):
        msgs, tools = _not_plain(rng)
        if tools is None:
            assert counter.count_plain(shape, msgs) is None
        result = counter.count(msgs, tools)
        assert result.counts.prompt == len(template.encode(msgs, tools))
        assert _key(result) == _key(ChatCounter(template, SegmentCache()).count_pieces(msgs, tools))
    # a tuple of messages, or messages that are not plain dicts, also go the general way
    msgs = [{"role": "user", "content": "hi"}]
    assert counter.count(tuple(msgs)).counts == counter.count(msgs).counts
    with pytest.raises(ValueError):
        counter.count(["not a message"])
    with pytest.raises(ValueError):
        counter.count([{"role": "user", "content": 5}])


def test_subclassed_templates_are_not_plain(registry: TokenizerRegistry) -> None:
    base = make_template("openai", registry.get("tiktoken:cl100k_base"))

    class Custom(type(base)):  # type: ignore[misc]
        pass

    assert plain_shape(Custom(registry.get("tiktoken:cl100k_base"))) is None
    assert plain_shape(base) is not None
