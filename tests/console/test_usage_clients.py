"""The Usage page's panel "By API and client" (the day rollups by client): the openai
SDK's chat traffic and Claude Code's Messages requests, each under its API and client,
as the admin API counts them; scoped like the rest of the page."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.console.conftest import MODEL, Console, caught_up
from tests.console.test_console_http import signed_in

CLAUDE_CODE = "claude-cli/2.0.14 (external, cli)"
ROW = re.compile(r'<tr data-operation="([^"]*)" data-client="([^"]*)">(.*?)</tr>', re.S)


def _panel(html: str) -> dict[tuple[str, str], dict[str, str]]:
    table = html[html.index('id="clients-table"'):]
    table = table[:table.index("</table>")]
    return {(op, client): dict(re.findall(r'<td data-col="([a-z_]+)"[^>]*>([^<]*)</td>', cells))
            for op, client, cells in ROW.findall(table)}


@pytest.fixture(scope="module")
def claude_code(console: Console) -> Console:
    """Two Messages requests from Claude Code with acme's chat key, on top of the
    fixture's 14 chat requests from the openai SDK."""
    for i in range(2):
        r = httpx.post(console.base + "/v1/messages", timeout=30,
                       headers={"x-api-key": console.acme, "user-agent": CLAUDE_CODE},
                       json={"model": MODEL, "max_tokens": 8,
                             "messages": [{"role": "user", "content": f"Fix bug {i}"}]})
        assert r.status_code == 200, r.text
    caught_up(console.gw, 14 + 2)
    return console


def test_the_panel_shows_each_api_and_client_as_the_admin_api_counts(
        claude_code: Console) -> None:
    console = claude_code
    api = console.admin_api("/admin/v1/usage/clients", since="7d")["data"]
    assert {(r["operation"], r["client"]): r["requests"] for r in api} == {
        ("chat", "openai-python"): 14, ("messages", "claude-cli"): 2}
    with signed_in(console, console.admin) as h:
        panel = _panel(h.get("/console/usage", params={"since": "7d"}).text)
    assert set(panel) == {("chat", "openai-python"), ("messages", "claude-cli")}
    for r in api:
        row = panel[(r["operation"], r["client"])]
        assert row["api"] == r["api"] and row["client"] == r["client"]
        assert row["requests"] == f"{r['requests']:,}"
        assert row["total_tokens"] == f"{r['total_tokens']:,}"
        assert row["token_share"] == f"{r['token_share'] * 100:.1f}%"
        assert row["cost"] == r["cost"]
    # the most tokens first
    assert next(iter(panel)) == ("chat", "openai-python")


def test_the_panel_follows_the_drill_down_and_the_tenant_scope(claude_code: Console) -> None:
    console = claude_code
    with signed_in(console, console.acme) as h:
        tenant = _panel(h.get("/console/usage").text)
        dept = _panel(h.get("/console/usage", params={"department": "research"}).text)
        app = _panel(h.get("/console/usage", params={"department": "~",
                                                     "app": "search"}).text)
    # acme: chat (research) 6 + search 3 from the SDK, 2 Messages requests from chat
    assert {k: v["requests"] for k, v in tenant.items()} == {
        ("chat", "openai-python"): "9", ("messages", "claude-cli"): "2"}
    assert {k: v["requests"] for k, v in dept.items()} == {
        ("chat", "openai-python"): "6", ("messages", "claude-cli"): "2"}
    assert {k: v["requests"] for k, v in app.items()} == {("chat", "openai-python"): "3"}
    with signed_in(console, console.globex) as h:
        globex = _panel(h.get("/console/usage").text)
    assert {k: v["requests"] for k, v in globex.items()} == {("chat", "openai-python"): "5"}


def test_the_panel_speaks_the_console_language(claude_code: Console) -> None:
    console = claude_code
    with signed_in(console, console.admin, **{"accept-language": "zh-CN"}) as h:
        html = h.get("/console/usage").text
    assert "按接口和客户端" in html and "Anthropic 消息" in html
    assert "By API and client" not in html
