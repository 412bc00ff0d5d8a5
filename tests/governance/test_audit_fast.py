"""The audit path's short cuts keep its records: token counts read without a dict per
request, the day of a record remembered, redaction skipped for texts the gates prove
clean, records handed to the audit thread in batches."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenplane.auth.principal import Principal
from tokenplane.config.governance_schema import AuditConfig, GovernanceConfig
from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.audit.chain import seal
from tokenplane.governance.audit.content import STRUCTURAL_KEYS, redact_tree
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.log import AuditLog, _day
from tokenplane.governance.audit.service import MAX_BATCH, AuditService, audit_redactor
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.governance.guard_state import BLOCK_CODES, GuardState
from tokenplane.governance.pii_policy import redact, scan
from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.audit_stage import (
    AuditFinisher,
    _limits,
    _response,
    _text_of,
    _tokens,
)
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.relayed import RelayedText
from tokenplane.tokens.counts import TokenCounts
from tokenplane.upstream.sse import frame

from .audit_helpers import KEY, T0, entry, lines
from .corpus import texts

DAY = 86400


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5000), min_size=8, max_size=8),
       st.none() | st.dictionaries(st.sampled_from(["prompt_tokens", "completion_tokens", "x"]),
                                   st.integers(0, 99) | st.text(max_size=2)))
def test_tokens_as_before(values: list[int], usage: dict[str, object] | None) -> None:
    ctx = RequestContext("r", "/v1/x", CHAT, b"", {})
    ctx.counts = TokenCounts(*values)
    ctx.usage = usage  # type: ignore[assignment]
    want = {k: v for k, v in ctx.counts.as_dict().items() if v}
    for name in ("prompt_tokens", "completion_tokens"):
        value = (usage or {}).get(name)
        if isinstance(value, int):
            want[name] = value
    assert _tokens(ctx) == want


def test_tokens_read_every_count_field() -> None:
    """A field added to TokenCounts must be added to _tokens too."""
    for i, f in enumerate(dataclasses.fields(TokenCounts)):
        ctx = RequestContext("r", "/v1/x", CHAT, b"", {})
        setattr(ctx.counts, f.name, i + 1)
        assert _tokens(ctx) == {f.name: i + 1}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 3).map(lambda k: T0 + k * DAY) | st.floats(-2.0, 2.0),
                min_size=1, max_size=6),
       st.lists(st.sampled_from([0.0, 1e-9, -1e-9, 1e-6, -1e-6, 0.5, -0.5, 1.0, -1.0,
                                 DAY - 1e-7, DAY - 0.5, DAY - 1.0]), min_size=1, max_size=6))
def test_remembered_day_is_the_day(bases: list[float], offsets: list[float]) -> None:
    log = AuditLog.__new__(AuditLog)
    log._day_span = (0, 0, "")
    for base in bases:
        for off in offsets:
            ts = (base if base > 1e6 else T0 + base * DAY) + off
            assert log._day_of(ts) == _day(ts), ts


def test_redactor_is_redact_for_every_text() -> None:
    analyzer = Analyzer()
    redactor = audit_redactor(analyzer)
    for text in texts():
        assert redactor(text) == (text if len(text) < 6 else redact(text, analyzer))


def test_sealed_lines_as_before(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a", KEY, checkpoint_every=4, group_size=3)
    fields = {"kind": "request", "request_id": "x", "seq": "not this"}
    log.append(fields, T0)
    assert fields == {"kind": "request", "request_id": "x", "seq": "not this"}  # not modified
    for i in range(6):
        log.append(entry(i), T0 + i)
    log.close()
    prev = "0" * 64
    for line in lines(tmp_path / "a"):
        rec = orjson.loads(line)
        body = {k: v for k, v in rec.items() if k != "hash"}
        assert body["prev_hash"] == prev
        assert seal(body)[0] == line
        prev = rec["hash"]


def test_records_reach_the_thread_in_batches(tmp_path: Path) -> None:
    async def run() -> list[str]:
        log = AuditLog(tmp_path / "b", KEY, retention="none")
        service = AuditService(log, AuditConfig())
        handed: list[int] = []
        original = service._pool.submit

        def counting(fn, *args):  # type: ignore[no-untyped-def]
            if args and isinstance(args[0], list):  # a batch (flush gets the time)
                handed.append(len(args[0]))
            return original(fn, *args)

        service._pool.submit = counting  # type: ignore[method-assign]
        for i in range(5):
            service.submit(entry(i), T0 + i)
            await asyncio.sleep(0)  # several loop turns: still one hand-off
        assert handed == []
        await asyncio.sleep(service.handoff_s * 4)
        assert handed == [5]
        for i in range(5, 5 + MAX_BATCH):
            service.submit(entry(i), T0 + i)
        assert handed == [5, MAX_BATCH]  # a full batch goes at once
        service.submit(entry(9999), T0)
        await service.flush()  # hands off what is queued
        assert handed == [5, MAX_BATCH, 1]
        assert service.completed == service.submitted == MAX_BATCH + 6
        await service.close()
        return [r["request_id"] for r in map(orjson.loads, lines(tmp_path / "b"))
                if r["kind"] == "request"]  # (and a checkpoint: T0 is long past)

    ids = asyncio.run(run())
    assert ids == [f"req-{i}" for i in range(5 + MAX_BATCH)] + ["req-9999"]


def test_submit_without_a_loop_hands_off_at_once(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "c", KEY, retention="none")
    service = AuditService(log, AuditConfig())
    service.submit(entry(1), time.time())
    service._pool.submit(lambda: None).result()
    assert service.completed == 1
    service._pool.shutdown(wait=True)
    log.close()


def _reference_entry(fin: AuditFinisher, ctx: RequestContext) -> AuditEntry:
    """AuditFinisher.entry as first written (keywords, every step spelled out)."""
    p = ctx.principal
    state = ctx.guard
    log_only = (state.policy.response if state is not None
                and not state.policy.response_rewrites else None)
    response = None
    if ctx.upstream_start is not None and (fin.keep_content or log_only is not None):
        response = _response(ctx, state)
    if state is not None and log_only is not None and response:
        state.note_pii("response", scan(_text_of(response), log_only))
    verdicts: dict[str, Any] = dict(state.verdicts) if state is not None else {}
    if ctx.error_code:
        verdicts["error"] = ctx.error_code
    verdict = ("block" if ctx.error_code in BLOCK_CODES
               else "flag" if state is not None and state.flagged
               else "allow" if state is not None else "unscreened")  # issue 31
    content = None
    if fin.keep_content and state is not None:
        content = {"request": state.request_content, "response": response}
    end_user = p.end_user if p is not None else None
    tokens = {k: v for k, v in ctx.counts.as_dict().items() if v}
    for name in ("prompt_tokens", "completion_tokens"):
        value = (ctx.usage or {}).get(name)
        if isinstance(value, int):
            tokens[name] = value
    return AuditEntry(
        request_id=ctx.request_id, tenant=p.tenant if p is not None else "",
        key_id=p.key_id if p is not None else None,
        principal=redact(end_user, fin.policies.analyzer) if end_user else None,
        app=p.app if p is not None else None, model=ctx.alias,
        backend=ctx.endpoint.id if ctx.endpoint is not None else None,
        status=ctx.http_status, tokens=tokens, limits=_limits(ctx, fin.policies.analyzer),
        verdicts=verdicts, verdict=verdict, content=content)


def _contexts(policies: GuardPolicies) -> list[RequestContext]:
    answer = orjson.dumps({"choices": [{"message": {"content": "mail x.y@example.com"}}]})
    limit = SimpleNamespace(scope=SimpleNamespace(kind="user", id="bob@example.com", model="m"),
                            rule=SimpleNamespace(name="rpm", kind="rate", unit="req", limit=9))
    out = []
    for i, (principal, error, stream, ticket, usage) in enumerate([
        (None, None, False, False, None),
        (Principal("k1", "acme", app="a"), None, False, True, {"prompt_tokens": 3}),
        (Principal("k2", "acme", end_user="bob@example.com"), "pii_blocked", True, False,
         {"completion_tokens": 2}),
        (Principal("k3", "t"), "upstream_error", False, True, {}),
    ]):
        ctx = RequestContext(f"r{i}", "/v1/chat/completions", CHAT, b"", {})
        ctx.principal, ctx.error_code, ctx.stream, ctx.usage = principal, error, stream, usage
        ctx.alias, ctx.http_status, ctx.upstream_start = "m", 200 + i, 1.0 if i else None
        ctx.counts = TokenCounts(i, 0, 2, 0, 5, 0, i, 0)
        ctx.relayed = RelayedText(CHAT)
        ctx.relayed.add(frame({"choices": [{"delta": {"content": "call 13800138000"}}]}))
        if ticket:
            ctx.ticket = SimpleNamespace(grant=SimpleNamespace(limits=[limit]))
        if i:
            state = GuardState(policies.for_principal("acme", None))
            state.request_content = [{"role": "user", "content": f"hi {i}"}]
            state.response_body = answer if i != 3 else None
            state.verdicts = {"pii": {"prompt": {}}}
            state.flagged = i == 3
            ctx.guard = state
        out.append(ctx)
    return out


def test_entry_as_before(tmp_path: Path) -> None:
    for retention, response in [("redacted", {"default": "allow"}), ("none", {"default": "log"})]:
        config = GovernanceConfig.model_validate({"pii": {"response": response}})
        policies = GuardPolicies(config)
        log = AuditLog(tmp_path / retention, KEY, retention=retention)
        fin = AuditFinisher(AuditService(log, AuditConfig(retention=retention)), policies)
        for ctx, again in zip(_contexts(policies), _contexts(policies), strict=True):
            assert fin.entry(ctx) == _reference_entry(fin, again)
        log.close()


def _reference_redact_tree(value: Any, redactor: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        return {k: v if k in STRUCTURAL_KEYS and isinstance(v, str)
                else _reference_redact_tree(v, redactor) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_reference_redact_tree(v, redactor) for v in value]
    return value


_leaves = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(
    max_size=8) | st.sampled_from(["a@b.cn", "13800138000", "role", "user"])
_trees = st.recursive(_leaves, lambda kids: st.lists(kids, max_size=4) | st.tuples(kids, kids)
                      | st.dictionaries(st.sampled_from([*STRUCTURAL_KEYS, "content", "x", 1]),
                                        kids, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_trees)
def test_redact_tree_as_before(tree: Any) -> None:
    redactor = audit_redactor(Analyzer())
    assert redact_tree(tree, redactor) == _reference_redact_tree(tree, redactor)
