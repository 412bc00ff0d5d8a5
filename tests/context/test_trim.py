"""History trimming: exactly to the limit (the trimmed prompt fits, one more unit
would not), system / pinned / current turn kept, tool calls kept with their results."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.context.trim import CannotFit, trim_history, units
from tokenplane.tokens.counter import ChatCounter
from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache
from tokenplane.tokens.templates import make_template


@pytest.fixture(scope="module")
def counters() -> dict[str, ChatCounter]:
    reg = TokenizerRegistry()
    cache = SegmentCache()
    return {
        "openai": ChatCounter(make_template("openai", reg.get("tiktoken:cl100k_base")), cache),
        "qwen": ChatCounter(make_template("qwen", reg.get("qwen:qwen2.5-72b-instruct")), cache),
        "deepseek": ChatCounter(make_template("deepseek", reg.get("deepseek")), cache),
    }


def _call(i: int) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": "lookup", "arguments": json.dumps({"q": f"item {i}"})}}]}


def _conversation(turns: int, tools_every: int = 3) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for i in range(turns):
        msgs.append({"role": "user", "content": f"Question {i}: " + "tell me more " * (i % 7)})
        if tools_every and i % tools_every == 1:
            msgs.append(_call(i))
            msgs.append({"role": "tool", "tool_call_id": f"call_{i}",
                         "content": "result " * (5 + i % 11)})
        msgs.append({"role": "assistant", "content": f"Answer {i}. " + "words " * (i % 13)})
    msgs.append({"role": "user", "content": "And now the real question?"})
    return msgs


def _count(counter: ChatCounter):
    return lambda messages: counter.count(messages).counts.prompt


def _check_pairs(msgs: list[dict[str, Any]]) -> None:
    """Every tool result follows its call, and every call's results are all there."""
    calls: dict[str, int] = {}
    for m in msgs:
        for c in m.get("tool_calls") or ():
            calls[c["id"]] = 0
        if m.get("role") == "tool":
            assert m["tool_call_id"] in calls, "a tool result without its call"
            calls[m["tool_call_id"]] += 1
    assert all(n == 1 for n in calls.values()), "a tool call without its result"


@settings(max_examples=40, deadline=None)
@given(turns=st.integers(1, 30), cut=st.floats(0.0, 1.0),
       family=st.sampled_from(["openai", "qwen", "deepseek"]),
       pin=st.sets(st.integers(0, 80), max_size=3))
def test_trimmed_exactly_to_the_limit(counters: dict[str, ChatCounter], turns: int,
                                      cut: float, family: str, pin: set[int]) -> None:
    count = _count(counters[family])
    msgs = _conversation(turns)
    pinned = {i for i in pin if i < len(msgs)}
    full = count(msgs)
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    # what is always kept, with the rest of its unit (a pinned call keeps its results)
    core_ix = sorted(i for u in units(msgs)
                     if any(j >= last_user or j in pinned or msgs[j]["role"] == "system"
                            for j in u) for i in u)
    core = [msgs[i] for i in core_ix]
    limit = count(core) + int(cut * (full - count(core)))
    try:
        out = trim_history(msgs, count, limit, pinned)
    except CannotFit:
        pytest.fail("the core always fits this limit")
    assert out.tokens == count(out.messages) <= limit
    assert out.dropped_tokens == full - out.tokens
    assert [msgs[i] for i in range(len(msgs)) if i not in out.dropped] == out.messages
    kept_ids = {id(m) for m in out.messages}
    assert all(id(m) in kept_ids for m in core)  # system, pinned, the current turn
    _check_pairs(out.messages)
    # exact: the next older unit (if any) does not fit
    groups = [u for u in units(msgs) if all(i in out.dropped for i in u)]
    if groups:
        nxt = groups[-1]
        more = sorted({msgs.index(m) for m in out.messages} | set(nxt))
        assert count([msgs[i] for i in more]) > limit
        # what was dropped is always the oldest
        assert max(out.dropped) < min((i for i in range(len(msgs))
                                       if i not in out.dropped and i not in core_ix),
                                      default=len(msgs))


def test_tool_call_and_results_go_together(counters: dict[str, ChatCounter]) -> None:
    count = _count(counters["qwen"])
    two = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "old question " * 40},
        two,
        {"role": "tool", "tool_call_id": "a", "content": "A result " * 30},
        {"role": "tool", "tool_call_id": "b", "content": "B result " * 30},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "new question"},
    ]
    assert units(msgs) == [[0], [1], [2, 3, 4], [5], [6]]
    # a limit that fits the answer and one tool result, but not the call with both
    with_answer = count([msgs[0], msgs[5], msgs[6]])
    limit = count([msgs[0], msgs[3], msgs[5], msgs[6]]) + 1
    assert with_answer < limit < count([msgs[0], *msgs[2:]])
    out = trim_history(msgs, count, limit)
    assert out.messages == [msgs[0], msgs[5], msgs[6]]
    assert out.dropped == [1, 2, 3, 4]
    _check_pairs(out.messages)


def test_nothing_to_trim_and_cannot_fit(counters: dict[str, ChatCounter]) -> None:
    count = _count(counters["openai"])
    msgs = _conversation(4)
    full = count(msgs)
    out = trim_history(msgs, count, full)
    assert out.messages == msgs and out.dropped == [] and out.dropped_tokens == 0
    with pytest.raises(CannotFit):
        trim_history(msgs, count, 5)
