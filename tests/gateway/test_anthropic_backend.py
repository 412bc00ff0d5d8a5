"""A ``type: anthropic`` backend: the gateway speaks Anthropic's Messages API to it over
real HTTP. The backend is the project's simulated engine, which serves ``/v1/messages``
natively and records what it was sent. Chat Completions clients reach it through
translation; Messages clients pass through with their cache_control markers kept."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.gateway.harness import GatewayThread
from tests.governance.test_gateway_sim_recording import RecordingSim

ALIAS = "claude-sim"


@pytest.fixture(scope="module")
def sim() -> Iterator[RecordingSim]:
    s = RecordingSim().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def gw(sim: RecordingSim, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    cfg: dict[str, Any] = {"models": [{
        "alias": ALIAS, "tokenizer": "cl100k_base", "chat_template": "llama3",
        "context_window": 8192,
        "prices": {"input": "3.00", "cached_input": "0.30", "cache_write": "3.75",
                   "cache_write_1h": "6.00", "output": "15.00"},
        "backends": [{"id": "anthropic", "type": "anthropic",
                      "base_url": f"http://127.0.0.1:{sim.port}", "model": "sim",
                      "anthropic": {"betas": ["token-efficient-tools-2025-02-19"]}}],
    }]}
    g = GatewayThread(cfg, Path(tmp_path_factory.mktemp("gw"))).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayThread) -> str:
    return gw.create_key("default", app="backend")


def test_chat_client_is_translated(gw: GatewayThread, key: str, sim: RecordingSim) -> None:
    c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    msgs: Any = [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Hello Claude"}]
    r = c.chat.completions.create(model=ALIAS, messages=msgs, max_tokens=7)
    assert r.choices[0].finish_reason == "length"
    assert r.usage is not None and r.usage.completion_tokens == 7
    sent = sim.recorded()[-1]
    assert sent["system"] == "Be brief." and sent["max_tokens"] == 7 and sent["model"] == "sim"
    assert sent["messages"] == [{"role": "user", "content": "Hello Claude"}]
    stopped = c.chat.completions.create(model=ALIAS, messages=msgs, max_tokens=30,
                                        stop=["zzz"])
    assert stopped.choices[0].finish_reason == "stop"
    assert sim.recorded()[-1]["stop_sequences"] == ["zzz"]
    # the gateway's own count of the prompt is what the backend reports
    expected = len(gw.gateway.counters.prompt_ids(ALIAS).messages(msgs, None))
    assert r.usage.prompt_tokens == expected
    chunks = list(c.chat.completions.create(model=ALIAS, messages=msgs, max_tokens=5,
                                            stream=True, stream_options={"include_usage": True}))
    assert [u.usage.completion_tokens for u in chunks if u.usage] == [5]
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert gw.gateway.counters.tokenizer(ALIAS).count(text) == 5
    c.close()


def test_chat_tool_calls_round_trip(gw: GatewayThread, key: str, sim: RecordingSim) -> None:
    c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    tools: Any = [{"type": "function", "function": {
        "name": "lookup", "parameters": {"type": "object",
                                          "properties": {"q": {"type": "string"}},
                                          "required": ["q"]}}}]
    r = c.chat.completions.create(model=ALIAS, tools=tools, tool_choice="required",
                                  max_tokens=100,
                                  messages=[{"role": "user", "content": "look it up"}])
    assert r.choices[0].finish_reason == "tool_calls"
    call = r.choices[0].message.tool_calls
    assert call and call[0].function.name == "lookup"  # type: ignore[union-attr]
    sent = sim.recorded()[-1]
    assert sent["tools"][0]["name"] == "lookup" and sent["tool_choice"] == {"type": "any"}
    c.close()


def test_messages_client_passes_through(gw: GatewayThread, key: str, sim: RecordingSim) -> None:
    c = anthropic.Anthropic(base_url=gw.base_url.removesuffix("/v1"), api_key=key,
                            max_retries=0,
                            default_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})
    system: Any = [{"type": "text", "text": "You are a coding agent. " * 40,
                    "cache_control": {"type": "ephemeral"}}]
    msg = c.messages.create(model=ALIAS, max_tokens=6, system=system,
                            messages=[{"role": "user", "content": "hi"}])
    assert msg.usage.output_tokens == 6 and msg.model == ALIAS
    sent = sim.recorded()[-1]
    assert sent["system"] == system  # the marker reached the backend untouched
    with c.messages.stream(model=ALIAS, max_tokens=4, system=system,
                           messages=[{"role": "user", "content": "again"}]) as s:
        final = s.get_final_message()
    assert final.usage.output_tokens == 4
    # the second request's system prompt came from the engine's prefix cache
    assert (final.usage.cache_read_input_tokens or 0) > 0
    # the backend's max_tokens is a ceiling, and a stop sequence is reported as one
    stopped = c.messages.create(model=ALIAS, max_tokens=500, stop_sequences=["zzz"],
                                messages=[{"role": "user", "content": "and stop"}])
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "zzz"
    natural = c.messages.create(model=ALIAS, max_tokens=1000,
                                messages=[{"role": "user", "content": "say a little"}])
    assert natural.stop_reason == "end_turn" and natural.usage.output_tokens < 1000
    c.close()


def test_completions_refused_with_a_reason(gw: GatewayThread, key: str) -> None:
    c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    with pytest.raises(openai.BadRequestError) as err:
        c.completions.create(model=ALIAS, prompt="x", max_tokens=3)
    assert err.value.status_code == 400
    c.close()


def test_the_ledger_prices_cache_reads(gw: GatewayThread, tmp_path: Path,
                                       sim: RecordingSim) -> None:
    cfg: dict[str, Any] = {"models": [{
        "alias": ALIAS, "tokenizer": "cl100k_base", "chat_template": "llama3",
        "context_window": 8192, "prices": {"input": "3.00", "cached_input": "0.30",
                                           "output": "15.00"},
        "backends": [{"type": "anthropic", "base_url": f"http://127.0.0.1:{sim.port}",
                      "model": "sim"}]}]}
    g = GatewayThread(cfg, tmp_path).start()
    k = g.create_key("default", app="ledger")
    c = anthropic.Anthropic(base_url=g.base_url.removesuffix("/v1"), api_key=k, max_retries=0)
    system = "A long shared system prompt for caching. " * 30
    for _ in range(2):
        c.messages.create(model=ALIAS, max_tokens=3, system=system,
                          messages=[{"role": "user", "content": "q"}])
    c.close()
    g.stop()
    rows = sorted(g.ledger_rows("app = 'ledger'"), key=lambda r: r["ts"])
    assert len(rows) == 2 and rows[1]["cached_input_tokens"] > 0
    first, second = rows
    assert second["cost_micros"] < first["cost_micros"]  # cache reads priced lower
    assert first["input_tokens"] == second["input_tokens"]
