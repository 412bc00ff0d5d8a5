"""Approximate prefix block hashes from message content (no tokenization)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tokenplane.operations.chat import CHAT
from tokenplane.operations.completions import COMPLETIONS
from tokenplane.operations.embeddings import EMBEDDINGS
from tokenplane.routing.gateway.prompt_blocks import chained_block_hashes, request_block_hashes


def _chat(*contents: str) -> dict[str, object]:
    return {"messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": c}
                         for i, c in enumerate(contents)]}


def test_only_full_blocks_are_emitted() -> None:
    body = _chat("a" * 400)
    assert request_block_hashes(CHAT, body, 15, 16) == []
    assert len(request_block_hashes(CHAT, body, 100, 16)) == 6
    assert request_block_hashes(EMBEDDINGS, {"input": "x" * 999}, 500, 16) == []


def test_a_conversation_shares_the_blocks_of_its_earlier_turns() -> None:
    first = request_block_hashes(CHAT, _chat("x" * 800, "y" * 800), 400, 16)
    longer = request_block_hashes(CHAT, _chat("x" * 800, "y" * 800, "z" * 800), 600, 16)
    assert len(first) == 25 and len(longer) == 37
    assert longer[:25] == first


def test_different_first_message_shares_nothing() -> None:
    a = request_block_hashes(CHAT, _chat("system A " * 50, "q"), 300, 16)
    b = request_block_hashes(CHAT, _chat("system B " * 50, "q"), 300, 16)
    assert a and b and a[0] != b[0]


def test_text_prompts_share_leading_slices() -> None:
    base = "lorem ipsum " * 200  # 2,400 chars: four full 512-char slices
    a = request_block_hashes(COMPLETIONS, {"prompt": base + "tail one"}, 600, 16)
    b = request_block_hashes(COMPLETIONS, {"prompt": base + "other tail!"}, 600, 16)
    assert a[:30] == b[:30] and a != b


def test_structured_content_is_hashed() -> None:
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi " * 300}]}]}
    same = {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi " * 300}]}]}
    assert request_block_hashes(CHAT, parts, 300, 16) == request_block_hashes(
        CHAT, same, 300, 16)


@given(st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=8),
       st.integers(0, 5000), st.integers(1, 64))
def test_block_count_is_floor_of_tokens_over_block_size(
    texts: list[str], tokens: int, block: int
) -> None:
    segs = [(len(t), t) for t in texts]
    out = chained_block_hashes(segs, tokens, block)
    assert len(out) == (tokens // block if tokens >= block else 0)
    assert chained_block_hashes(segs, tokens, block) == out  # deterministic
