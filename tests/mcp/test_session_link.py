"""The session waterfall links a ``tools/call`` through the gateway to the model
requests that carry its result: an agent loop (the openai SDK for the model, the
official MCP client for the tool) and the admin API's ``tool_costs``."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai

from tests.gateway.harness import GatewayThread
from tests.mcp.test_gateway import client, mcp_url, texts

MODEL = "sim-llama3-8b"
SID = "trip-mcp-1"
TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "crm__lookup", "description": "Find a customer.",
    "parameters": {"type": "object", "properties": {"customer": {"type": "string"}}}}}]


def _chat(c: openai.OpenAI, messages: list[Any]) -> None:
    c.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, max_tokens=8,
                              extra_headers={"x-tokenplane-session": SID})


def _report(gw: GatewayThread, key: str, steps: int) -> dict[str, Any]:
    url = f"http://127.0.0.1:{gw.port}/admin/v1/sessions/{SID}"
    deadline = time.monotonic() + 20
    while True:
        r = httpx.get(url, headers={"authorization": f"Bearer {key}"}, timeout=10)
        if r.status_code == 200 and len(r.json()["steps"]) == steps:
            return dict(r.json())
        assert time.monotonic() < deadline, r.text
        time.sleep(0.2)


async def test_waterfall_links_the_call_to_the_steps_that_carry_its_result(
        gw: GatewayThread) -> None:
    key = gw.create_key("acme", app="agent")
    oai = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=30)
    messages: list[Any] = [{"role": "user", "content": "What is Jane's e-mail address?"}]
    _chat(oai, messages)  # step 1
    async with client(mcp_url(gw), key, **{"x-tokenplane-session": SID}) as c:
        result = texts(await c.call_tool("crm__lookup", {"customer": "jane"}))[0]
        await c.call_tool("crm__echo", {"text": "never sent to the model"})
    messages += [{"role": "assistant", "content": "", "tool_calls": [
                     {"id": "call_1", "type": "function", "function": {
                         "name": "crm__lookup", "arguments": '{"customer": "jane"}'}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": result}]
    _chat(oai, messages)  # step 2: carries the result
    messages += [{"role": "assistant", "content": "It is on file."},
                 {"role": "user", "content": "Thanks. And her phone?"}]
    _chat(oai, messages)  # step 3: carries it again (history)
    audit = gw.gateway.governance.audit  # type: ignore[union-attr]
    assert audit is not None
    gw.call(audit.flush())
    report = _report(gw, key, 3)
    costs = report["tool_costs"]
    tokens = gw.gateway.counters.tokenizer(MODEL).count(result)
    (call,) = costs["calls"]
    assert call["tool"] == "crm__lookup" and call["tokens"] == tokens
    assert call["first_step"] == 2 and call["steps_carrying"] == 2
    (tool,) = costs["tools"]  # the echo's result never reached the model
    assert tool == {"tool": "crm__lookup", "calls": 1, "result_tokens": tokens,
                    "carried_tokens": 2 * tokens,
                    "share_of_input": round(2 * tokens / report["total"]["input_tokens"], 4)}
    assert costs["input_tokens"] == report["total"]["input_tokens"]
    # the console's session page shows it
    base = f"http://127.0.0.1:{gw.port}"
    with httpx.Client(base_url=base, timeout=30) as h:
        form = h.get("/console/login")
        csrf = form.text.split('name="csrf" value="')[1].split('"')[0]
        assert h.post("/console/login", data={"key": key, "csrf": csrf},
                      headers={"origin": base}).status_code == 303
        page = h.get("/console/sessions", params={"id": SID}).text
    row = page.split('<tr data-tool="crm__lookup">')[1].split("</tr>")[0]
    assert f'data-col="carried_tokens">{2 * tokens}</td>' in row
    assert f'{100 * tool["share_of_input"]:.1f}%' in row
