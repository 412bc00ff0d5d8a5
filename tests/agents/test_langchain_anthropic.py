"""LangChain's ``ChatAnthropic`` (package ``langchain-anthropic``) against a running
gateway: ``invoke``, ``stream`` and ``bind_tools`` with a tool call and its result sent
back, on in-process simulated replicas behind a ``model_map`` for Claude's names. The
usage LangChain reports is the engine's count, and the ledger keeps the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

from tests.gateway.harness import GatewayThread, sim_config

ALIAS = "sim-llama3-8b"
CLAUDE = "claude-sonnet-4-5"
SYSTEM = "You are a terse assistant."
SESSION = "lc-session-1"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 C"


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[GatewayThread]:
    cfg = sim_config(replicas=1)
    cfg["model_map"] = [{"match": "claude-*", "alias": ALIAS}]
    g = GatewayThread(cfg, tmp_path).start()
    yield g
    if g.server is not None:  # a test that read the ledger has stopped it already
        g.stop()


def chat(gw: GatewayThread, max_tokens: int, **kw: Any) -> ChatAnthropic:
    key = gw.create_key("default", department="eng", app="langchain")
    return ChatAnthropic(  # type: ignore[call-arg]
        model=CLAUDE, max_tokens=max_tokens, max_retries=0,
        anthropic_api_url=gw.base_url.removesuffix("/v1"), anthropic_api_key=key,
        default_headers={"x-tokenplane-session": SESSION}, **kw)


def engine_prompt(gw: GatewayThread, messages: list[dict[str, Any]]) -> int:
    """What the engine counts for the canonical form of these chat messages."""
    return len(gw.gateway.counters.prompt_ids(ALIAS).messages(messages, None))


def ledger(gw: GatewayThread) -> list[dict[str, Any]]:
    gw.stop()
    rows = sorted(gw.ledger_rows("app = 'langchain'"), key=lambda r: r["arrival_ts"])
    for r in rows:
        assert r["status"] == "ok" and r["operation"] == "messages", r
        assert r["model"] == ALIAS and r["usage_source"] == "upstream"
        assert r["client"] == "langchain-anthropic"  # its User-Agent, over the SDK's
        assert r["session_id"] == SESSION
        assert r["input_tokens"] == (r["input_system"] + r["input_history"] + r["input_tools"]
                                     + r["input_user"] + r["input_context"]), r
        assert r["input_tokens"] == r["estimated_input_tokens"]
    return rows


def test_invoke_usage_is_the_engines(gw: GatewayThread) -> None:
    llm = chat(gw, 12)
    msg = llm.invoke([SystemMessage(SYSTEM), HumanMessage("Name a prime.")])
    assert isinstance(msg, AIMessage) and isinstance(msg.content, str) and msg.content
    assert msg.response_metadata["model"] == CLAUDE  # the name sent, not the alias
    assert msg.response_metadata["stop_reason"] == "max_tokens"
    usage = msg.usage_metadata
    assert usage is not None
    expected = engine_prompt(gw, [{"role": "system", "content": SYSTEM},
                                  {"role": "user", "content": "Name a prime."}])
    assert usage["input_tokens"] == expected  # LangChain's count includes cache reads
    assert usage["output_tokens"] == 12
    assert usage["total_tokens"] == expected + 12
    assert gw.gateway.counters.tokenizer(ALIAS).count(msg.content) == 12
    [row] = ledger(gw)
    assert row["input_tokens"] == expected and row["output_tokens"] == 12
    assert row["input_system"] > 0 and row["input_user"] > 0 and not row["input_history"]
    assert row["stream"] == 0


def test_stream_usage_is_the_engines(gw: GatewayThread) -> None:
    llm = chat(gw, 9)
    chunks = list(llm.stream([SystemMessage(SYSTEM), HumanMessage("Count to nine."),
                              AIMessage("One moment."), HumanMessage("Go on.")]))
    assert len(chunks) > 2 and all(isinstance(c, AIMessageChunk) for c in chunks)
    full = chunks[0]
    for c in chunks[1:]:
        full = full + c
    assert isinstance(full, AIMessageChunk)
    text = "".join(b["text"] for b in full.content if isinstance(b, dict) and "text" in b) \
        if isinstance(full.content, list) else full.content
    assert gw.gateway.counters.tokenizer(ALIAS).count(text) == 9
    usage = full.usage_metadata
    assert usage is not None
    expected = engine_prompt(gw, [{"role": "system", "content": SYSTEM},
                                  {"role": "user", "content": "Count to nine."},
                                  {"role": "assistant", "content": "One moment."},
                                  {"role": "user", "content": "Go on."}])
    assert usage["input_tokens"] == expected
    assert usage["output_tokens"] == 9
    [row] = ledger(gw)
    assert row["stream"] == 1 and row["input_tokens"] == expected
    assert row["output_tokens"] == 9 and row["input_history"] > 0


def test_bind_tools_call_and_result(gw: GatewayThread) -> None:
    forced = chat(gw, 200).bind_tools([get_weather], tool_choice="any")
    question: list[BaseMessage] = [HumanMessage("What is the weather in Paris?")]
    call = forced.invoke(question)
    assert isinstance(call, AIMessage)
    assert call.response_metadata["stop_reason"] == "tool_use"
    assert len(call.tool_calls) >= 1
    tc = call.tool_calls[0]
    assert tc["name"] == "get_weather" and isinstance(tc["args"], dict)
    assert isinstance(tc["args"].get("city"), str)  # drawn from the tool's schema
    assert call.usage_metadata is not None and call.usage_metadata["output_tokens"] > 0
    # the agent loop: run the tool, send its result back (tool_choice auto now)
    result = get_weather.invoke(tc["args"])
    follow_msgs = [*question, call, ToolMessage(result, tool_call_id=tc["id"] or "")]
    answer = chat(gw, 20).bind_tools([get_weather]).invoke(follow_msgs)
    assert isinstance(answer, AIMessage) and not answer.tool_calls  # answers in text
    assert answer.response_metadata["stop_reason"] in ("end_turn", "max_tokens")
    assert answer.usage_metadata is not None
    first, second = ledger(gw)
    assert first["tool_calls"] == len(call.tool_calls) and first["input_tools"] > 0
    assert first["input_tokens"] == call.usage_metadata["input_tokens"]
    assert first["output_tokens"] == call.usage_metadata["output_tokens"]
    assert second["input_tokens"] == answer.usage_metadata["input_tokens"]
    assert second["input_tools"] == first["input_tools"]
    # the call (history) and the tool's result are in the follow-up's prompt
    assert second["input_history"] > 0 and second["tool_output_tokens"] > 0
    assert [first["session_step"], second["session_step"]] == [1, 2]
