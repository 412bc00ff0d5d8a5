"""The input guard's short paths (messages passed on uncopied when the policy finds
nothing, the chat read backwards for the injection screen, no decision when the screen
finds nothing) end exactly where the full path ends: same body, verdicts, vault,
flags, headers and errors, for several policies and many bodies."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tokenplane.auth.principal import Principal
from tokenplane.config.governance_schema import GovernanceConfig
from tokenplane.errors import GatewayError
from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.analyzer_cache import CachedAnalyzer
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.governance.guard_state import GuardState
from tokenplane.governance.injection.detector import HeuristicDetector, Source
from tokenplane.operations.chat import CHAT
from tokenplane.operations.registry import standard_operations
from tokenplane.pipeline import guard_stages
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.guard_stages import InputGuardStage, message_text, screened_texts

from .corpus import PII, PROSE, labelled

CONFIGS: list[dict[str, Any]] = [
    {},  # the defaults: log PII in prompts, flag injections
    {"pii": {"prompt": {"default": "mask"}, "tool_results": {"default": "tokenize"}}},
    {"pii": {"prompt": {"default": "log", "actions": {"EMAIL_ADDRESS": "block"}}},
     "injection": {"mode": "block"}},
    {"pii": {"prompt": {"default": "tokenize", "actions": {"IP_ADDRESS": "allow"}}},
     "injection": {"mode": "log", "log_at": 0.0}},
    {"pii": {"prompt": {"default": "allow"}}, "injection": {"mode": "none"},
     "tools": {"allowed": ["get_weather"], "mode": "strip"}, "max_output_tokens": 100},
]


def _bodies() -> list[tuple[str, dict[str, Any]]]:
    attacks = [r["text"] for r in labelled() if r["label"] == "attack"][:40:4]
    out: list[tuple[str, dict[str, Any]]] = []
    for i, value in enumerate([*PROSE, *PII, *attacks]):
        other = PROSE[i % len(PROSE)]
        out.append(("chat", {"model": "m", "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"{other} {value}"}]}))
        out.append(("chat", {"model": "m", "messages": [
            {"role": "user", "content": [{"type": "text", "text": value},
                                         {"type": "image_url", "image_url": {"url": "x"}},
                                         {"type": "text", "text": other}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_weather", "arguments": f'{{"q": "{value}"}}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": f"result: {value}"},
            "not a message",
            {"role": "tool", "tool_call_id": "c2", "content": other}],
            "tools": [{"type": "function", "function": {"name": "get_weather"}},
                      {"type": "function", "function": {"name": "delete_all"}}]}))
        out.append(("text_completion", {"model": "m", "prompt": [value, other, 3]}))
        out.append(("embeddings", {"model": "m", "input": value}))
    out.append(("chat", {"model": "m"}))  # no messages at all
    out.append(("chat", {"model": "m", "messages": (  # not a list
        {"role": "user", "content": PROSE[0]}, {"role": "tool", "content": PII[0]})}))
    out.append(("chat", {"model": "m", "messages": [{"role": "user", "content": ""},
                                                     {"role": "user"}]}))
    return out


def _reference_chat_screened(messages: list[Any]) -> list[tuple[str, Source]]:
    """screened_texts for a chat as first written (forward, with max over indices)."""
    msgs = [m for m in messages if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=-1)
    out: list[tuple[str, Source]] = []
    if last_user >= 0:
        out.append((message_text(msgs[last_user]), "user"))
    start = last_user + 1 if last_user >= 0 else 0
    out += [(message_text(m), "tool") for m in msgs[start:] if m.get("role") == "tool"]
    return [(t, s) for t, s in out if t]


def _outcome(stage: InputGuardStage, operation: str, body: dict[str, Any]) -> dict[str, Any]:
    ctx = RequestContext("r1", "/v1/x", standard_operations().named(operation), b"", {})
    ctx.principal = Principal("key_1", "acme", app="chat")
    ctx.alias = "m"
    ctx.body = body
    error = None
    try:
        asyncio.run(stage.run(ctx))
    except GatewayError as exc:
        error = (type(exc).__name__, exc.status, exc.code, exc.message)
    state = ctx.guard
    assert isinstance(state, GuardState)
    return {"body": ctx.body, "error": error, "verdicts": state.verdicts,
            "vault": [(p, state.vault.lookup(p)) for p in state.vault.placeholders()],
            "flagged": state.flagged, "flags": ctx.flags, "headers": ctx.response_headers,
            "content": state.request_content, "max_tokens": ctx.max_tokens}


@pytest.mark.parametrize("config", CONFIGS)
def test_short_paths_end_where_the_full_path_ends(config: dict[str, Any]) -> None:
    fast = InputGuardStage(GuardPolicies(GovernanceConfig.model_validate(config)))
    full = InputGuardStage(GuardPolicies(GovernanceConfig.model_validate(config),
                                         detector=HeuristicDetector(prefilter=False)))
    for operation, body in _bodies():
        got = _outcome(fast, operation, body)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(guard_stages, "_chat_screened", _reference_chat_screened)
            mp.setattr(Analyzer, "nothing_in", lambda self, text: False)
            mp.setattr(CachedAnalyzer, "nothing_in", lambda self, text: False)
            mp.setattr(guard_stages, "clean", lambda verdict: False)
            want = _outcome(full, operation, body)
        assert got == want, (config, operation, body)


def test_clean_chat_body_is_passed_on_as_it_is() -> None:
    stage = InputGuardStage(GuardPolicies(GovernanceConfig()))
    body = {"model": "m", "messages": [{"role": "system", "content": PROSE[0]},
                                       {"role": "user", "content": PROSE[1]}]}
    out = _outcome(stage, "chat", body)
    assert out["body"] is body and out["verdicts"] == {"pii": {"prompt": {}}}
    found = _outcome(stage, "chat", {"model": "m", "messages": [
        {"role": "user", "content": "mail a.b@example.com"}]})
    assert found["verdicts"]["pii"]["prompt"] == {"EMAIL_ADDRESS": {"log": 1}}


def test_chat_read_backwards_gives_the_same_texts() -> None:
    msgs: list[Any] = [{"role": "tool", "content": "t0"}, {"role": "user", "content": "u1"},
                       "x", {"role": "tool", "content": "t1"}, {"role": "assistant"},
                       {"role": "tool", "content": [{"type": "text", "text": "t2"}]},
                       {"role": "tool", "content": ""}]
    for n in range(len(msgs) + 1):
        part = msgs[:n]
        want = _reference_chat_screened(part)
        assert screened_texts(CHAT, {"messages": part}) == want
        assert screened_texts(CHAT, {"messages": tuple(part)}) == want  # not a list
