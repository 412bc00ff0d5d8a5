"""The Tools page and its admin route: MCP calls by tool and app, from the audit log,
within the signed-in tenant."""

from __future__ import annotations

import re

import httpx
import pytest

from mcp import MCPError
from tests.gateway.harness import GatewayThread
from tests.mcp.test_gateway import client, mcp_url

TOKEN = re.compile(r'name="csrf" value="([^"]+)"')


def _signed_in(gw: GatewayThread, key: str) -> httpx.Client:
    base = f"http://127.0.0.1:{gw.port}"
    h = httpx.Client(base_url=base, timeout=30)
    form = h.get("/console/login")
    found = TOKEN.search(form.text)
    assert found is not None
    r = h.post("/console/login", data={"key": key, "csrf": found.group(1)},
               headers={"origin": base})
    assert r.status_code == 303, r.text
    return h


async def test_tools_page_and_route(gw: GatewayThread) -> None:
    acme, globex = gw.create_key("acme", app="web"), gw.create_key("globex", app="bot")
    async with client(mcp_url(gw), acme) as c:
        await c.call_tool("crm__lookup", {"customer": "ann"})
        with pytest.raises(MCPError):
            await c.call_tool("fs__read", {"path": "/etc/hosts"})
    async with client(mcp_url(gw), globex) as c:
        await c.call_tool("crm__echo", {"text": "hi there"})
    base = f"http://127.0.0.1:{gw.port}"
    r = httpx.get(base + "/admin/v1/tools", headers={"authorization": f"Bearer {globex}"})
    assert r.status_code == 200, r.text
    assert [(x["tool"], x["app"], x["calls"]) for x in r.json()["data"]] == [
        ("crm__echo", "bot", 1)]
    r = httpx.get(base + "/admin/v1/tools", params={"tenant": "acme"},
                  headers={"authorization": f"Bearer {globex}"})
    assert r.status_code == 403
    r = httpx.get(base + "/admin/v1/tools", params={"since": "yesterday-ish"},
                  headers={"authorization": f"Bearer {acme}"})
    assert r.status_code == 400
    h = _signed_in(gw, acme)
    try:
        page = h.get("/console/tools")
        assert page.status_code == 200, page.text
        assert 'id="nav-tools"' in page.text and 'id="tools-off"' not in page.text
        assert 'data-tool="crm__lookup"' in page.text and 'data-tool="fs__read"' in page.text
        assert "crm__echo" not in page.text  # globex's
        row = page.text.split('data-tool="fs__read"')[1].split("</tr>")[0]
        assert '<td class="num" data-col="denied">1</td>' in row
    finally:
        h.close()
