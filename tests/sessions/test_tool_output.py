"""The tool-output policy: exact bounds with three tokenizers, fields kept, flags and
measures (tool tokens, tokens added since the previous step, growth)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.config.sessions_schema import ToolOutputConfig
from tokenplane.sessions.tool_output import (
    FLAG_GROWTH,
    FLAG_LARGE,
    FLAG_TRUNCATED,
    apply_policy,
    head_tail,
    keep_fields,
)
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.registry import TokenizerRegistry

SPECS = ("tiktoken:cl100k_base", "qwen:qwen2.5-72b-instruct", "deepseek")
REGISTRY = TokenizerRegistry()
MARKER = "\n[... {dropped} tokens of tool output removed by tokenplane ...]\n"
LOG = "\n".join(f"2026-12-02T05:{i % 60:02d}:00Z INFO worker-{i} handled job {i * 7} ok "
                f"在 {i} 毫秒内完成 ✓" for i in range(300))


def tok(spec: str) -> Tokenizer:
    return REGISTRY.get(spec)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("limit", [16, 17, 50, 333])
@pytest.mark.parametrize("share", [0.0, 0.3, 0.5, 1.0])
def test_head_tail_is_never_over_the_size(spec: str, limit: int, share: float) -> None:
    t = tok(spec)
    out = head_tail(LOG, limit, share, MARKER, t, t.count)
    n = t.count(out)
    assert n <= limit
    assert n >= limit - 8 or limit < 40  # the marker's own tokens aside, the size is used
    if "[... " in out:  # the configured marker, with the tokens it stands for
        dropped = int(out.split("[... ")[1].split(" tokens")[0])
        assert 0 < dropped <= t.count(LOG)
        mark = "\n[... "
    else:  # the marker would take more than half of the size: the short one
        assert limit < 40 and "[...]" in out
        mark = "[...]"
    if share == 0.0:
        assert out.startswith(mark)
    if share == 1.0:
        assert out.endswith("...]\n" if mark != "[...]" else "[...]")


@settings(max_examples=60, deadline=None)
@given(text=st.text(min_size=0, max_size=600), limit=st.integers(16, 120),
       share=st.floats(0, 1), spec=st.sampled_from(SPECS))
def test_head_tail_bound_holds_for_any_text(text: str, limit: int, share: float,
                                           spec: str) -> None:
    t = tok(spec)
    out = head_tail(text, limit, share, MARKER, t, t.count)
    assert t.count(out) <= limit
    if t.count(text) <= limit:
        assert out == text


def test_keep_fields_of_an_object_and_of_a_list() -> None:
    assert keep_fields('{"a": 1, "b": [2], "c": "x"}', ["a", "c"]) == '{"a":1,"c":"x"}'
    rows = json.dumps([{"sku": 1, "body": "long"}, {"sku": 2}, 3])
    assert keep_fields(rows, ["sku"]) == '[{"sku":1},{"sku":2},3]'
    assert keep_fields("not json", ["a"]) is None
    assert keep_fields('"a string"', ["a"]) is None


def conversation(results: list[str], new: list[str]) -> list[Any]:
    msgs: list[Any] = [{"role": "system", "content": "agent"},
                       {"role": "user", "content": "go"}]
    for i, r in enumerate(results):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": r})
    msgs.append({"role": "assistant", "content": "calling", "tool_calls": []})
    for j, r in enumerate(new):
        msgs.append({"role": "tool", "tool_call_id": f"n{j}",
                     "content": [{"type": "text", "text": r}]})
    return msgs


def test_measures_and_flags_without_action() -> None:
    t = tok("tiktoken:cl100k_base")
    old, new = ["x " * 50, "y " * 70], ["z " * 300, "w " * 20]
    cfg = ToolOutputConfig(max_result_tokens=200, max_growth_tokens=250)  # type: ignore[call-arg]
    msgs = conversation(old, new)
    out = apply_policy(msgs, cfg, t)
    sizes = [t.count(r) for r in old + new]
    assert out.messages is msgs  # flag only: nothing rewritten
    assert out.results == 4
    assert out.tool_tokens == sum(sizes)
    assert out.added_tokens == sizes[2] + sizes[3]
    assert out.growth_tokens == sizes[2] + sizes[3]
    assert out.largest_result == sizes[2] > 200
    assert out.flags == [FLAG_LARGE, FLAG_GROWTH]
    assert out.removed_tokens == 0


def test_truncate_shrinks_every_result_over_the_size_the_same_way_each_step() -> None:
    t = tok("qwen:qwen2.5-72b-instruct")
    cfg = ToolOutputConfig(max_result_tokens=40, action="truncate",  # type: ignore[call-arg]
                           head_share=0.5)
    big = LOG[:3000]
    first = apply_policy(conversation([], [big]), cfg, t)
    later = apply_policy(conversation([big], ["small"]), cfg, t)
    cut = first.messages[-1]["content"]
    assert later.messages[3]["content"] == cut  # the same result, the same cut
    assert t.count(cut) <= 40
    assert first.flags == [FLAG_LARGE, FLAG_TRUNCATED]
    assert first.removed_tokens == t.count(big) - t.count(cut)
    assert first.tool_tokens == first.added_tokens == t.count(cut)
    assert later.added_tokens == t.count("small")
    assert later.tool_tokens == t.count(cut) + t.count("small")


def test_keep_fields_then_truncate_when_still_over() -> None:
    t = tok("deepseek")
    rows = json.dumps([{"id": i, "title": f"t{i}", "html": "<p>" + "text " * 40 + "</p>"}
                       for i in range(30)])
    cfg = ToolOutputConfig(max_result_tokens=400, action="keep_fields",  # type: ignore[call-arg]
                           fields=["id", "title"])
    out = apply_policy(conversation([], [rows]), cfg, t)
    kept = out.messages[-1]["content"]
    assert kept == keep_fields(rows, ["id", "title"]) and t.count(kept) <= 400
    tight = cfg.model_copy(update={"max_result_tokens": 40})
    out = apply_policy(conversation([], [rows]), tight, t)
    cut = out.messages[-1]["content"]
    assert t.count(cut) <= 40 and "html" not in cut and "removed by tokenplane" in cut


def test_a_config_without_fields_is_refused() -> None:
    with pytest.raises(ValueError, match="fields"):
        ToolOutputConfig(max_result_tokens=40, action="keep_fields")  # type: ignore[call-arg]


class CountingTokenizer:
    """A tokenizer that counts how often it encodes a whole text."""

    def __init__(self, inner: Tokenizer) -> None:
        self.inner, self.name, self.encodes = inner, inner.name, 0

    def encode(self, text: str) -> list[int]:
        self.encodes += 1
        return self.inner.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.inner.decode(ids)

    def count(self, text: str) -> int:
        return self.inner.count(text)


def test_the_cut_cache_cuts_each_result_once_and_stays_bounded() -> None:
    from tokenplane.sessions.tool_output import CutCache

    t = CountingTokenizer(tok("tiktoken:cl100k_base"))
    cfg = ToolOutputConfig(max_result_tokens=40, action="truncate")  # type: ignore[call-arg]
    cuts = CutCache(max_entries=2)
    big = [LOG[:2000], LOG[2000:4000], LOG[4000:6000]]
    first = apply_policy(conversation([], big[:1]), cfg, t, cuts=cuts)
    assert t.encodes == 1
    again = apply_policy(conversation(big[:1], ["x"]), cfg, t, cuts=cuts)
    assert t.encodes == 1  # the earlier result: its cut from the cache
    assert again.messages[3]["content"] == first.messages[-1]["content"]
    apply_policy(conversation(big, []), cfg, t, cuts=cuts)
    assert t.encodes == 3 and len(cuts._cuts) == 2  # two new cuts; the oldest dropped
    other = cfg.model_copy(update={"head_share": 0.9})  # another policy: another cut
    apply_policy(conversation(big[2:], []), other, t, cuts=cuts)
    assert t.encodes == 4
