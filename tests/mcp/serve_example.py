"""``examples/mcp.yaml`` served (imported by tests/test_examples.py): its HTTP server is
a real SDK server started here, its stdio server the same SDK server launched by the
gateway."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mcp import MCPError
from tests.gateway.harness import GatewayThread
from tests.mcp.support import tool_server
from tests.mcp.test_gateway import client, texts
from tests.services import REDIS_URL, fresh_redis_prefix

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp.yaml"


async def test_serves_mcp(tmp_path: Path) -> None:
    import yaml
    with tool_server("fs") as fs_url, fresh_redis_prefix("mcp-example") as prefix:
        text = EXAMPLE.read_text(encoding="utf-8")
        text = text.replace("http://127.0.0.1:9101/mcp", fs_url)
        text = text.replace("redis://127.0.0.1:6379/0", REDIS_URL)
        text = text.replace("[python3, -m, crm_mcp_server]",
                            f"[{sys.executable}, -m, tests.mcp.tool_server, crm, stdio]")
        cfg = yaml.safe_load(text)
        cfg["admission"] = {"key_prefix": prefix}
        gw = GatewayThread(cfg, tmp_path / "gw").start()
        try:
            acme, globex = gw.create_key("acme"), gw.create_key("globex")
            url = f"http://127.0.0.1:{gw.port}/mcp"
            async with client(url, acme) as c:
                names = sorted(t.name for t in (await c.list_tools()).tools)
                assert names == ["crm__echo", "crm__lookup", "fs__read"]
                r = await c.call_tool("fs__read", {"path": "/srv/docs/a"})
                assert texts(r) == ["contents of /srv/docs/a"]
                r = await c.call_tool("crm__lookup", {"customer": "jane"})  # over stdio
                assert texts(r)[0].startswith("customer jane")
                with pytest.raises(MCPError) as exc:
                    await c.call_tool("crm__lookup", {"customer": "x" * 65})
                assert "at most 64 characters" in exc.value.error.message
                with pytest.raises(MCPError) as exc:
                    await c.call_tool("fs__read", {})
                assert "argument 'path' is required" in exc.value.error.message
            async with client(url, globex) as c:
                assert [t.name for t in (await c.list_tools()).tools] == ["crm__echo"]
        finally:
            gw.stop()
