"""The chat count memo answers a repeated request exactly as counting it again would,
hands out results the caller may change, and stays within its bounds."""

from __future__ import annotations

from typing import Any

from tests.gateway.harness import sim_config
from tokenplane.config.loader import validate_config
from tokenplane.pipeline.count_memo import ChatCountMemo
from tokenplane.pipeline.counting import ModelCounters
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.counts import TokenCounts

BODIES: list[dict[str, Any]] = [
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "hello there"}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                               {"type": "image_url", "image_url": {"url": "x"}}]}]},
    {"messages": [{"role": "user", "content": "what is the weather?"}],
     "tools": [{"type": "function", "function": {"name": "weather", "parameters": {}}}]},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "hello there", "name": "doc-1"}]},
]


def test_repeated_requests_count_as_a_fresh_count_does() -> None:
    cfg = validate_config(sim_config(tokenizer="cl100k_base"))
    model = cfg.models[0]
    counters = ModelCounters(cfg.models)
    counter = counters.counter(model.alias)
    for body in BODIES * 3:
        got = counters.count(model, "chat", body)
        fresh = counter.count(body["messages"], body.get("tools"))
        assert (got.counts, got.system_fingerprint, got.exact, got.flags) == (
            fresh.counts, fresh.system_fingerprint, fresh.exact, fresh.flags)
    assert counters.memo.hits == 2 * len(BODIES)
    assert len(counters.memo) == len(BODIES)


def test_results_are_the_callers_to_change() -> None:
    cfg = validate_config(sim_config(tokenizer="cl100k_base"))
    model = cfg.models[0]
    counters = ModelCounters(cfg.models)
    first = counters.count(model, "chat", BODIES[0])
    prompt = first.counts.prompt
    first.counts.user += 1000
    assert counters.count(model, "chat", BODIES[0]).counts.prompt == prompt


def test_memo_is_bounded_by_entries_and_bytes() -> None:
    result = CountResult(TokenCounts(user=1))
    memo = ChatCountMemo(max_entries=3, max_bytes=10_000)
    keys = [memo.key("m", [{"role": "user", "content": str(i)}], None) for i in range(5)]
    for key in keys:
        assert key is not None
        memo.put(key, result)
    assert len(memo) == 3 and memo.get(keys[0]) is None  # type: ignore[arg-type]
    small = ChatCountMemo(max_entries=100, max_bytes=200)
    size = 0
    for i in range(10):
        key = small.key("m", [{"role": "user", "content": "x" * 30 + str(i)}], None)
        assert key is not None
        small.put(key, result)
        size = len(key[1])
    assert small.bytes <= 200 and len(small) == 200 // size
    assert ChatCountMemo.key("m", [{"content": 2**70}], None) is None
