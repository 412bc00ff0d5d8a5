"""``tokenplane tools``: check (the rules, offline), list (a running gateway), usage (the
audit log's MCP records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mcp import MCPError
from tests.gateway.harness import GatewayThread
from tests.mcp.support import gateway_config
from tests.mcp.test_gateway import client, mcp_url
from tokenplane.cli.main import build_cli

runner = CliRunner()


def test_check_says_what_the_rules_decide(tmp_path: Path) -> None:
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(yaml.safe_dump(gateway_config("http://h:1/mcp", "http://h:2/mcp")))
    app = build_cli()
    ok = runner.invoke(app, ["tools", "check", "--config", str(cfg), "--tenant", "acme",
                             "fs__read", "crm__lookup", "--arguments",
                             '{"path": "/srv/docs/x"}', "--format", "json"])
    assert ok.exit_code == 0, ok.output
    assert [r["decision"] for r in json.loads(ok.output)] == ["allow", "allow"]
    bad = runner.invoke(app, ["tools", "check", "--config", str(cfg), "--tenant", "globex",
                              "crm__echo", "crm__lookup", "fs__delete", "--format", "json"])
    assert bad.exit_code == 1
    rows = json.loads(bad.output)
    assert [r["decision"] for r in rows] == ["allow", "deny_hidden", "deny_hidden"]
    arg = runner.invoke(app, ["tools", "check", "--config", str(cfg), "--tenant", "acme",
                              "fs__read", "--arguments", '{"path": "/etc"}'])
    assert arg.exit_code == 1 and "deny_argument" in arg.output
    assert runner.invoke(app, ["tools", "check", "--config", str(cfg), "--tenant", "acme",
                               "fs__read", "--arguments", "[1]"]).exit_code == 2


async def test_list_and_usage(gw: GatewayThread) -> None:
    acme = gw.create_key("acme", app="web")
    app = build_cli()
    listed = runner.invoke(app, ["tools", "list", "--url", f"http://127.0.0.1:{gw.port}",
                                 "--key", acme, "--format", "json"])
    assert listed.exit_code == 0, listed.output
    assert sorted(r["name"] for r in json.loads(listed.output)) == [
        "crm__echo", "crm__lookup", "fs__big", "fs__delete", "fs__read", "fs__sleep"]
    async with client(mcp_url(gw), acme) as c:
        await c.call_tool("crm__echo", {"text": "one two three"})
        await c.call_tool("crm__echo", {"text": "four"})
        await c.call_tool("fs__big", {"words": 500})
        with pytest.raises(MCPError):
            await c.call_tool("fs__read", {"path": "/etc/passwd"})
    audit = gw.gateway.governance.audit  # type: ignore[union-attr]
    assert audit is not None
    gw.call(audit.flush())
    out = runner.invoke(app, ["tools", "usage", "--home", str(gw.home), "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = {r["tool"]: r for r in json.loads(out.output)}
    assert rows["crm__echo"]["calls"] == 2 and rows["crm__echo"]["app"] == "web"
    assert rows["crm__echo"]["result_tokens"] == 4  # "one two three" + "four"
    assert rows["fs__big"]["truncated"] == 1 and rows["fs__big"]["result_tokens"] <= 64
    assert rows["fs__read"]["denied"] == 1 and rows["fs__read"]["result_tokens"] == 0
    assert next(iter(rows)) == "fs__big"  # the most result tokens first
