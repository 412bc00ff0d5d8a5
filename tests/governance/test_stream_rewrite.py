"""The output guard's event rewriting, without a network: random chunkings of a
tokenized answer come out restored, one event per event, with no placeholder text."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.config.governance_schema import GovernanceConfig
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.governance.guard_state import GuardState
from tokenplane.governance.vault import PLACEHOLDER_RE
from tokenplane.operations.registry import standard_operations
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.output_guard import StreamRewrite

VALUES = [("11010519491231002X", "CN_ID_CARD"), ("zhang.san@example.com", "EMAIL_ADDRESS"),
          ("13812345678", "CN_MOBILE")]
POLICIES = GuardPolicies(GovernanceConfig())


def _setup(operation: str = "chat") -> tuple[StreamRewrite, GuardState]:
    op = standard_operations().named(operation)
    ctx = RequestContext("r1", op.path, op, b"", {})
    state = GuardState(POLICIES.for_principal("t", None))
    return StreamRewrite(ctx, state), state


def _event(piece: str, finish: str | None = None) -> bytes:
    obj = {"id": "x", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {"content": piece} if piece else {},
                        "finish_reason": finish}]}
    return b"data: " + orjson.dumps(obj)


def _content(ev: bytes) -> str:
    obj = orjson.loads(ev[len(b"data: "):])
    return str(obj["choices"][0]["delta"].get("content") or "")


texts = st.lists(st.sampled_from(["a", " <", "b> ", "客户", "<", "CN", "_1", ">", "x"] +
                                 [v for v, _ in VALUES]), max_size=12)


@settings(max_examples=150, deadline=None)
@given(texts, st.lists(st.integers(1, 6), min_size=1, max_size=30))
def test_random_chunkings_restore_exactly(parts: list[str], cuts: list[int]) -> None:
    original = "".join(parts)
    rw, state = _setup()
    tokenized = original
    for value, entity in VALUES:
        tokenized = tokenized.replace(value, state.vault.tokenize(value, entity))
    pieces: list[str] = []
    i = 0
    for n in cuts * (len(tokenized) // max(1, sum(cuts)) + 1):
        if i >= len(tokenized):
            break
        pieces.append(tokenized[i : i + n])
        i += n
    events = [_event(p) for p in pieces] + [_event("", "stop")]
    out = [_content(rw.event(ev)) for ev in events]
    assert len(out) == len(events)  # one event out per event in
    assert "".join(out) == original
    placeholders = set(state.vault.placeholders())
    for piece in out:
        for m in PLACEHOLDER_RE.finditer(piece):
            assert m.group(0) not in placeholders


def test_usage_and_non_json_events_pass_unchanged() -> None:
    rw, _ = _setup()
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":1}}'
    assert rw.event(usage) == usage
    assert rw.event(b": comment") == b": comment"


def test_text_held_without_a_finish_reason_is_sent_at_the_end() -> None:
    rw, state = _setup("text_completion")
    ph = state.vault.tokenize("13812345678", "CN_MOBILE")
    obj = {"choices": [{"index": 0, "text": "call " + ph[:4], "finish_reason": None}]}
    first = orjson.loads(rw.event(b"data: " + orjson.dumps(obj))[6:])
    assert first["choices"][0]["text"] == "call "
    tail = rw.tail()
    assert orjson.loads(tail[6:].strip())["choices"][0]["text"] == ph[:4]
