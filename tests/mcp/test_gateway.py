"""The MCP gateway end to end: real MCP servers written with the official SDK, the
official client through the gateway's /mcp, two tenants."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp import Client, MCPError
from tests.gateway.harness import GatewayThread


def mcp_url(gw: GatewayThread, server: str | None = None) -> str:
    return f"http://127.0.0.1:{gw.port}/mcp" + (f"/{server}" if server else "")


@asynccontextmanager
async def client(url: str, key: str, **headers: str) -> AsyncIterator[Client]:
    """The official client's streamable HTTP transport, with our key."""
    async with create_mcp_http_client(
            headers={"authorization": f"Bearer {key}", **headers}) as http, \
            Client(streamable_http_client(url, http_client=http), cache=None) as c:
        yield c


def texts(result: Any) -> list[str]:
    return [c.text for c in result.content if getattr(c, "type", "") == "text"]


async def tool_names(url: str, key: str) -> list[str]:
    async with client(url, key) as c:
        return sorted(t.name for t in (await c.list_tools()).tools)


async def test_two_tenants_see_and_call_only_their_tools(gw: GatewayThread) -> None:
    acme = gw.create_key("acme")
    globex = gw.create_key("globex")
    url = mcp_url(gw)
    assert await tool_names(url, acme) == [
        "crm__echo", "crm__lookup", "fs__big", "fs__delete", "fs__read", "fs__sleep"]
    assert await tool_names(url, globex) == ["crm__echo"]
    async with client(url, globex) as c:
        r = await c.call_tool("crm__echo", {"text": "hello"})
        assert texts(r) == ["hello"]
        for hidden in ("crm__lookup", "fs__read", "nope__x", "fs__missing"):
            with pytest.raises(MCPError) as exc:
                await c.call_tool(hidden, {"path": "/srv/docs/a"})
            assert exc.value.error.code == -32602
            assert exc.value.error.message == f"Unknown tool: {hidden}"  # no hint
    async with client(url, acme) as c:
        r = await c.call_tool("fs__read", {"path": "/srv/docs/a.txt"})
        assert texts(r) == ["contents of /srv/docs/a.txt"]
        r = await c.call_tool("crm__lookup", {"customer": "jane"})
        assert "jane.doe@example.com" in texts(r)[0]
    # one server's endpoint: its own names
    assert await tool_names(mcp_url(gw, "crm"), globex) == ["echo"]
    async with client(mcp_url(gw, "crm"), globex) as c:
        assert texts(await c.call_tool("echo", {"text": "x"})) == ["x"]


async def test_argument_rule_rate_limit_and_truncation(gw: GatewayThread) -> None:
    acme = gw.create_key("acme")
    async with client(mcp_url(gw), acme) as c:
        for bad, why in (("/etc/passwd", "argument 'path' must match '/srv/docs/'"),
                         ("/srv/docs/../../etc/passwd", "may not hold '..' path segments")):
            with pytest.raises(MCPError) as exc:
                await c.call_tool("fs__read", {"path": bad})
            assert exc.value.error.code == -32003
            assert why in exc.value.error.message
        # 3 calls a minute per key; the refused argument calls above did not count
        for i in range(3):
            await c.call_tool("fs__read", {"path": f"/srv/docs/{i}"})
        with pytest.raises(MCPError) as exc:
            await c.call_tool("fs__read", {"path": "/srv/docs/4"})
        assert exc.value.error.code == -32029
        assert "at most 3 calls in 60 s" in exc.value.error.message
        assert exc.value.error.data["retry_after_s"] > 0
        r = await c.call_tool("fs__big", {"words": 3000})
        (text,) = texts(r)
        tok = gw.gateway.counters.tokenizer("sim-llama3-8b")
        assert tok.count(text) <= 64
        assert text.startswith("word0 word1") and "tokens of tool output removed" in text
        assert text.rstrip().endswith("word2999")
        assert r.structured_content is None


async def test_destructive_tool_needs_confirmation(gw: GatewayThread) -> None:
    acme = gw.create_key("acme")
    async with client(mcp_url(gw), acme) as c:
        listed = {t.name: t for t in (await c.list_tools()).tools}
        annotations = listed["fs__delete"].annotations
        assert annotations is not None and annotations.destructive_hint is True
        with pytest.raises(MCPError) as exc:
            await c.call_tool("fs__delete", {"path": "/srv/docs/x"})
        assert exc.value.error.code == -32003
        assert 'params._meta["tokenplane/confirm"] = true' in exc.value.error.message
        r = await c.call_tool("fs__delete", {"path": "/srv/docs/x"},
                              meta={"tokenplane/confirm": True})
        assert texts(r) == ["deleted /srv/docs/x"]


async def test_injected_result_is_withheld(gw: GatewayThread) -> None:
    ops = gw.create_key("acme", app="ops")
    async with client(mcp_url(gw), ops) as c:
        with pytest.raises(MCPError) as exc:
            await c.call_tool("fs__inject", {})
        assert exc.value.error.code == -32003
        assert "prompt injection" in exc.value.error.message


async def test_a_hanging_server_times_out_and_the_session_goes_on(gw: GatewayThread) -> None:
    acme = gw.create_key("acme")
    async with client(mcp_url(gw), acme) as c:
        with pytest.raises(MCPError) as exc:
            await c.call_tool("fs__sleep", {"seconds": 5})
        assert exc.value.error.code == -32010
        assert "did not answer within 2 s" in exc.value.error.message
        assert texts(await c.call_tool("crm__echo", {"text": "still here"})) == ["still here"]
        # a server nobody answers for: left out of the lists, its calls refused
        with pytest.raises(MCPError) as exc:
            await c.call_tool("dead__anything", {})
        assert exc.value.error.code == -32011 and "'dead' is unavailable" in \
            exc.value.error.message
        assert len((await c.list_tools()).tools) == 6


async def test_resources_and_prompts_are_filtered(gw: GatewayThread) -> None:
    acme, globex = gw.create_key("acme"), gw.create_key("globex")
    async with client(mcp_url(gw), acme) as c:
        (res,) = (await c.list_resources()).resources
        assert str(res.uri) == "mcp+fs:file:///srv/docs/readme.txt"
        read = await c.read_resource(str(res.uri))
        assert read.contents[0].text == "read me first"
        (prompt,) = (await c.list_prompts()).prompts
        assert prompt.name == "fs__summarize"
        got = await c.get_prompt("fs__summarize", {"text": "abc"})
        assert "Summarize: abc" in got.messages[0].content.text
    async with client(mcp_url(gw), globex) as c:
        assert (await c.list_resources()).resources == []
        assert (await c.list_prompts()).prompts == []
        with pytest.raises(MCPError) as exc:
            await c.read_resource("mcp+fs:file:///srv/docs/readme.txt")
        assert exc.value.error.code == -32602
        with pytest.raises(MCPError) as exc:
            await c.get_prompt("fs__summarize", {"text": "abc"})
        assert exc.value.error.code == -32602


def test_bad_messages_get_json_rpc_errors(gw: GatewayThread) -> None:
    key = gw.create_key("acme")
    url = mcp_url(gw)
    h = {"authorization": f"Bearer {key}", "accept": "application/json, text/event-stream"}
    with httpx.Client(headers=h, timeout=10) as http:
        r = http.post(url, content=b"{not json")
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700
        r = http.post(url, json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
        assert r.status_code == 400 and r.json()["error"]["code"] == -32600
        r = http.post(url, json={"jsonrpc": "1.0", "id": 1, "method": "ping"})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32600
        r = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 400 and "Mcp-Session-Id" in r.json()["error"]["message"]
        r = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
        assert r.status_code == 200 and r.json()["error"]["code"] == -32601
        r = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                      headers={"mcp-session-id": "nope"})
        assert r.status_code == 404
        big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "a" * 2_000_000}}
        r = http.post(url, json=big)
        assert r.status_code == 413 and r.json()["error"]["code"] == -32013
        assert "1048576 bytes" in r.json()["error"]["message"]
        r = http.post(mcp_url(gw, "nope"), json={"jsonrpc": "2.0", "id": 1,
                                                  "method": "initialize", "params": {}})
        assert r.status_code == 404 and r.json()["error"]["code"] == -32601
        r = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert r.status_code == 401 and r.json()["error"]["code"] == -32001
        r = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                 "params": {}}, headers={"x-tokenplane-model": "gpt-nope"})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32602
        assert "x-tokenplane-model" in r.json()["error"]["message"]
        init = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                    "params": {"protocolVersion": "2025-11-25"}})
        assert init.json()["result"]["protocolVersion"] == "2025-11-25"
        sid = init.headers["mcp-session-id"]
        s = {"mcp-session-id": sid}
        r = http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "nope/x"}, headers=s)
        assert r.status_code == 200 and r.json()["error"]["code"] == -32601
        r = http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                 "params": {"name": "fs__read", "arguments": "x"}}, headers=s)
        assert r.json()["error"]["code"] == -32602
        other = gw.create_key("acme")  # a session belongs to the key that opened it
        r = http.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"},
                      headers={**s, "authorization": f"Bearer {other}"})
        assert r.status_code == 404
        assert http.delete(url, headers=s).status_code == 200
        r = http.post(url, json={"jsonrpc": "2.0", "id": 5, "method": "ping"}, headers=s)
        assert r.status_code == 404


async def test_every_call_is_audited_with_pii_masked(gw: GatewayThread) -> None:
    acme = gw.create_key("acme")
    async with client(mcp_url(gw), acme) as c:
        await c.call_tool("crm__lookup", {"customer": "bob@example.org"})
        with pytest.raises(MCPError):
            await c.call_tool("fs__read", {"path": "/etc/shadow"})
    audit = gw.gateway.governance.audit  # type: ignore[union-attr]
    assert audit is not None
    gw.call(audit.flush())
    records = _audit_records(gw.home)
    calls = [r for r in records if r.get("kind") == "mcp" and r["method"] == "tools/call"]
    ok = next(r for r in calls if r["name"] == "lookup")
    assert ok["decision"] == "allow" and ok["server"] == "crm" and ok["tenant"] == "acme"
    assert ok["tokens"]["result"] > 0 and ok["result_bytes"] > 0 and ok["latency_ms"] > 0
    dumped = str(ok["content"])
    assert "bob@example.org" not in dumped and "jane.doe@example.com" not in dumped
    denied = next(r for r in calls if r["name"] == "read")
    assert denied["decision"] == "deny_argument" and "/srv/docs/" in denied["reason"]


def _audit_records(home: Path) -> list[dict[str, Any]]:
    import orjson
    out: list[dict[str, Any]] = []
    for f in sorted((home / "audit").rglob("*.jsonl")):
        out.extend(orjson.loads(line) for line in f.read_bytes().splitlines() if line)
    return out


def test_metrics_count_calls(gw: GatewayThread) -> None:
    key = gw.create_key("globex")

    async def go() -> None:
        async with client(mcp_url(gw), key) as c:
            await c.list_tools()  # as clients do: a listed name is a series of its own
            await c.call_tool("crm__echo", {"text": "a b c"})
    asyncio.run(go())
    body = gw.gateway.metrics.registry
    from prometheus_client import generate_latest
    text = generate_latest(body).decode()
    assert 'tokenplane_mcp_calls_total{decision="allow",method="tools/call",name="echo",' \
        'server="crm",tenant="globex"} 1.0' in text
    assert 'tokenplane_mcp_result_tokens_total{name="echo",server="crm",tenant="globex"}' in text

    async def unknown() -> None:  # names a client makes up do not become series
        async with client(mcp_url(gw), key) as c:
            for name in ("nope__a1", "nope__a2", "crm__made_up"):
                with pytest.raises(MCPError):
                    await c.call_tool(name, {})
    asyncio.run(unknown())
    text = generate_latest(body).decode()
    assert "nope" not in text and "made_up" not in text
    assert 'decision="deny_hidden",method="tools/call",name="(unlisted)",' \
        'server="(unknown)",tenant="globex"} 2.0' in text
