"""The official ``anthropic`` SDK against a running gateway (Anthropic's Messages API on
the canonical path), with in-process simulated replicas and a ``model_map`` that sends
Claude's names to the self-hosted alias."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from tests.gateway.harness import GatewayThread, sim_config

ALIAS = "sim-llama3-8b"
CLAUDE = "claude-sonnet-4-6"
SYSTEM = "You are a terse assistant."
TOOLS: list[dict[str, Any]] = [{
    "name": "get_weather", "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]},
}]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg = sim_config()
    cfg["model_map"] = [{"match": "claude-*", "alias": ALIAS}]
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("gw"))).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayThread) -> str:
    return gw.create_key("default", department="eng", app="agent")


def client(gw: GatewayThread, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.base_url.removesuffix("/v1"), api_key=key,
                               max_retries=0)


def engine_prompt(gw: GatewayThread, messages: list[dict[str, Any]],
                  tools: list[dict[str, Any]] | None = None) -> int:
    """What the engine counts for the canonical form of these chat messages."""
    return len(gw.gateway.counters.prompt_ids(ALIAS).messages(messages, tools))


def test_create_counts_exactly(gw: GatewayThread, key: str) -> None:
    c = client(gw, key)
    msg = c.messages.create(model=CLAUDE, max_tokens=12, system=SYSTEM,
                            messages=[{"role": "user", "content": "Name a prime."}])
    assert msg.type == "message" and msg.role == "assistant"
    assert msg.model == CLAUDE  # the name the client sent, not the alias
    assert msg.stop_reason == "max_tokens"
    assert msg.usage.output_tokens == 12
    expected = engine_prompt(gw, [{"role": "system", "content": SYSTEM},
                                  {"role": "user", "content": "Name a prime."}])
    u = msg.usage
    assert u.input_tokens + (u.cache_read_input_tokens or 0) \
        + (u.cache_creation_input_tokens or 0) == expected
    text = "".join(b.text for b in msg.content if b.type == "text")
    assert gw.gateway.counters.tokenizer(ALIAS).count(text) == 12
    c.close()


def test_stream_text(gw: GatewayThread, key: str) -> None:
    c = client(gw, key)
    with c.messages.stream(model=CLAUDE, max_tokens=9,
                           messages=[{"role": "user", "content": "Count to nine."}]) as s:
        events = [e.type for e in s]
        final = s.get_final_message()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_delta" in events and "message_delta" in events
    assert final.usage.output_tokens == 9 and final.stop_reason == "max_tokens"
    text = "".join(b.text for b in final.content if b.type == "text")
    assert gw.gateway.counters.tokenizer(ALIAS).count(text) == 9
    c.close()


def test_tool_use_stream_and_not(gw: GatewayThread, key: str) -> None:
    c = client(gw, key)
    msg = c.messages.create(model=CLAUDE, max_tokens=200, tools=TOOLS,  # type: ignore[arg-type]
                            tool_choice={"type": "any"},
                            messages=[{"role": "user", "content": "Weather in Paris?"}])
    assert msg.stop_reason == "tool_use"
    uses = [b for b in msg.content if b.type == "tool_use"]
    assert uses and uses[0].name == "get_weather" and isinstance(uses[0].input, dict)
    # the tool's result sent back, as an agent loop does
    follow = c.messages.create(
        model=CLAUDE, max_tokens=20, tools=TOOLS,  # type: ignore[arg-type]
        messages=[{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": msg.content},  # type: ignore[typeddict-item]
                  {"role": "user", "content": [{"type": "tool_result",
                                                "tool_use_id": uses[0].id,
                                                "content": "Sunny, 21 C"}]}])
    assert follow.stop_reason in ("end_turn", "max_tokens")
    with c.messages.stream(model=CLAUDE, max_tokens=200, tools=TOOLS,  # type: ignore[arg-type]
                           tool_choice={"type": "any"},
                           messages=[{"role": "user", "content": "Weather in Rome?"}]) as s:
        deltas = [e.delta.type for e in s if e.type == "content_block_delta"]
        final = s.get_final_message()
    assert "input_json_delta" in deltas
    assert final.stop_reason == "tool_use"
    streamed = [b for b in final.content if b.type == "tool_use"]
    assert streamed and isinstance(streamed[0].input, dict)
    c.close()


def test_thinking_blocks(gw: GatewayThread, key: str) -> None:
    c = client(gw, key)
    thinking: Any = {"type": "enabled", "budget_tokens": 2048}
    msg = c.messages.create(model=CLAUDE, max_tokens=4000, thinking=thinking,
                            messages=[{"role": "user", "content": "Think, then answer."}])
    kinds = [b.type for b in msg.content]
    assert kinds[0] == "thinking" and "text" in kinds
    with c.messages.stream(model=CLAUDE, max_tokens=3000, thinking=thinking,
                           messages=[{"role": "user", "content": "Think again."}]) as s:
        deltas = {e.delta.type for e in s if e.type == "content_block_delta"}
    assert {"thinking_delta", "text_delta"} <= deltas
    c.close()


def test_count_tokens_is_exact(gw: GatewayThread, key: str) -> None:
    c = client(gw, key)
    got = c.messages.count_tokens(model=CLAUDE, system=SYSTEM, tools=TOOLS,  # type: ignore[arg-type]
                                  messages=[{"role": "user", "content": "Hi there"}])
    chat_tools = [{"type": "function", "function": {
        "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
        for t in TOOLS]
    assert got.input_tokens == engine_prompt(
        gw, [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi there"}],
        chat_tools)
    c.close()


def test_typed_errors(gw: GatewayThread, key: str) -> None:
    c = client(gw, key)
    with pytest.raises(anthropic.BadRequestError) as bad:
        c.messages.create(model=CLAUDE, max_tokens=0,
                          messages=[{"role": "user", "content": "x"}])
    assert bad.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert bad.value.response.headers.get("request-id")
    with pytest.raises(anthropic.NotFoundError):
        c.messages.create(model="gpt-unknown", max_tokens=5,
                          messages=[{"role": "user", "content": "x"}])
    c.close()
    bad_key = anthropic.Anthropic(base_url=gw.base_url.removesuffix("/v1"),
                                  api_key="tp-nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as auth:
        bad_key.messages.create(model=CLAUDE, max_tokens=5,
                                messages=[{"role": "user", "content": "x"}])
    assert auth.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    bad_key.close()


def test_async_client_concurrent_streams(gw: GatewayThread, key: str) -> None:
    async def run() -> list[int]:
        ac = anthropic.AsyncAnthropic(base_url=gw.base_url.removesuffix("/v1"), api_key=key,
                                      max_retries=0)

        async def one(n: int) -> int:
            async with ac.messages.stream(
                    model=CLAUDE, max_tokens=n,
                    messages=[{"role": "user", "content": f"count to {n}"}]) as s:
                final = await s.get_final_message()
            return final.usage.output_tokens

        try:
            return list(await asyncio.gather(*(one(n) for n in (3, 5, 8, 13))))
        finally:
            await ac.close()

    assert asyncio.run(run()) == [3, 5, 8, 13]


def test_ledger_keeps_messages_by_source(tmp_path: Path) -> None:
    cfg = sim_config()
    cfg["model_map"] = [{"match": "claude-*", "alias": ALIAS}]
    g = GatewayThread(cfg, tmp_path).start()
    k = g.create_key("default", app="claude-code")
    c = anthropic.Anthropic(base_url=g.base_url.removesuffix("/v1"), api_key=k, max_retries=0,
                            default_headers={"x-claude-code-session-id": "cc-session-1"})
    c.messages.create(model=CLAUDE, max_tokens=5, system=SYSTEM, tools=TOOLS,  # type: ignore[arg-type]
                      messages=[{"role": "user", "content": "first"},
                                {"role": "assistant", "content": "ok"},
                                {"role": "user", "content": "second"}])
    c.close()
    g.stop()
    rows = g.ledger_rows("app = 'claude-code'")
    assert len(rows) == 1
    r = rows[0]
    assert r["operation"] == "messages" and r["model"] == ALIAS
    assert r["input_system"] > 0 and r["input_tools"] > 0 and r["input_history"] > 0
    assert r["input_user"] > 0 and r["output_tokens"] == 5
    assert r["input_tokens"] == (r["input_system"] + r["input_history"] + r["input_tools"]
                                 + r["input_user"] + r["input_context"])
    assert r["session_id"] == "cc-session-1"
    assert r["client"] == "anthropic-python"
