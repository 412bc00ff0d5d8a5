"""Claude Code (the ``claude`` CLI) run headless with the gateway as both its model and
its MCP server: ``--mcp-config`` names the gateway's ``/mcp`` (streamable HTTP, the
tokenplane key in ``Authorization: Bearer``), and the gateway fronts one real MCP server
(``tests/mcp/tool_server.py``'s ``crm``, the official SDK) with two tools, ``lookup``
and ``echo``, of which the key's rules allow ``lookup`` only.

One agent turn: Claude Code lists the gateway's tools and offers the model the one it
may use (``mcp__tp__crm__lookup``, with no built-in tool beside it); the simulated model
(``tool_call_rate: 1.0``) calls it; the call goes through the gateway to the server;
Claude Code sends the result back; the model answers in text and the turn ends. Then:
the server saw the call, the audit log has its ``kind: "mcp"`` record, the ledger's
second step carries the result's tokens, and the session's ``tool_costs`` link the call
to that step.

The model side is set up as in ``test_claude_code.py`` (its docstring says why);
in addition ``--tools ""`` turns every built-in tool off (MCP tools stay), and
``ENABLE_TOOL_SEARCH=false`` keeps the MCP tool in the request's ``tools`` rather than
behind a tool-search tool.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from tests.agents.test_claude_code import (
    ALIAS,
    MODEL,
    blocks,
    claude_binary,
    claude_env,
)
from tests.gateway.harness import GatewayThread, sim_config
from tests.mcp.support import tool_server
from tokenplane.cli.main import build_cli

ALLOWED = "crm__lookup"
HIDDEN = "crm__echo"
TOOL = f"mcp__tp__{ALLOWED}"  # Claude Code's name: mcp__<server>__<tool>
PROMPT = "Look up the customer Jane and tell me her e-mail address."


def gateway_config(crm_url: str) -> dict[str, Any]:
    cfg = sim_config(replicas=1, context_window=200_000)
    cfg["models"][0]["backends"][0]["sim"] = {"tool_call_rate": 1.0}
    cfg["model_map"] = [{"match": "*", "alias": ALIAS}]
    cfg["mcp"] = {"accounting_model": ALIAS,
                  "servers": [{"name": "crm", "url": crm_url, "timeout_s": 10}],
                  "rules": [{"tenant": "default", "allow": [ALLOWED]}]}
    return cfg


def run_claude(binary: str, cwd: Path, env: dict[str, str], mcp_url: str,
               key: str) -> list[dict[str, Any]]:
    mcp = {"mcpServers": {"tp": {"type": "http", "url": mcp_url,
                                 "headers": {"Authorization": f"Bearer {key}"}}}}
    cmd = [binary, "-p", PROMPT, "--output-format", "stream-json", "--verbose",
           "--model", MODEL, "--tools", "", "--allowedTools", TOOL,
           "--mcp-config", json.dumps(mcp), "--strict-mcp-config",
           "--max-turns", "4", "--no-session-persistence"]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=90,
                          stdin=subprocess.DEVNULL, check=False)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:], events[-1:])
    return events


def audit_records(home: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in sorted((home / "audit").rglob("*.jsonl")):
        out.extend(orjson.loads(line) for line in f.read_bytes().splitlines() if line)
    return out


def session_report(home: Path, session: str) -> dict[str, Any]:
    """The session's answer as `tokenplane usage session` reads it from the ledger and
    the audit log (the gateway stopped: its journal drained, nothing to wait for)."""
    result = CliRunner().invoke(build_cli(), ["usage", "session", session, "--home",
                                              str(home), "--format", "json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert isinstance(found, dict) and found["id"] == session, found
    return found


def test_claude_code_calls_an_mcp_tool_through_the_gateway(tmp_path: Path) -> None:
    binary = claude_binary()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with tool_server("crm") as crm_url:
        gw = GatewayThread(gateway_config(crm_url), tmp_path / "gw").start()
        try:
            key = gw.create_key("default", department="eng", app="claude-code")
            env = claude_env(home, gw.base_url.removesuffix("/v1"), key)
            env["ENABLE_TOOL_SEARCH"] = "false"
            started = time.monotonic()
            events = run_claude(binary, work, env, f"http://127.0.0.1:{gw.port}/mcp", key)
            took = time.monotonic() - started
            result = events[-1]
            assert result["type"] == "result", events[-3:]
            session = result["session_id"]
            audit = gw.gateway.governance.audit  # type: ignore[union-attr]
            assert audit is not None
            gw.call(audit.flush())
        finally:
            gw.stop()
    report = session_report(gw.home, session)
    assert took < 60, took

    # Claude Code saw the allowed tool only, connected, and offered it alone
    init = next(e for e in events if e.get("type") == "system" and e.get("subtype") == "init")
    assert init["tools"] == [TOOL], init["tools"]
    assert [(s["name"], s["status"]) for s in init["mcp_servers"]] == [("tp", "connected")]

    # the turn: the model called the MCP tool, Claude Code sent its result, then text
    assert result["subtype"] == "success" and result["is_error"] is False, result
    assert result["num_turns"] == 2 and result["stop_reason"] == "end_turn", result
    uses, answers = blocks(events, "tool_use"), blocks(events, "tool_result")
    assert len(uses) == 1 and uses[0]["name"] == TOOL, uses
    (answer,) = answers
    assert answer["tool_use_id"] == uses[0]["id"] and not answer.get("is_error"), answer
    customer = uses[0]["input"]["customer"]
    expected = f"customer {customer}: email jane.doe@example.com, phone +1 415 555 0100"
    assert expected in json.dumps(answer["content"]), answer  # the server's own answer

    # the gateway audited the call (allowed, the server answered) and no hidden tool
    records = [r for r in audit_records(gw.home) if r.get("kind") == "mcp"]
    calls = [r for r in records if r["method"] == "tools/call"]
    assert len(calls) == 1, calls
    (call,) = calls
    assert (call["server"], call["name"], call["decision"]) == ("crm", "lookup", "allow")
    assert call["tenant"] == "default" and call["tokens"]["result"] > 0, call
    tokens = gw.gateway.counters.tokenizer(ALIAS).count(expected)
    assert call["tokens"]["result"] == tokens, (call["tokens"], tokens)
    assert all(r.get("name") != "echo" for r in records), records

    # the ledger: the follow-up request carries the tool's result
    rows = sorted(gw.ledger_rows("app = 'claude-code'"), key=lambda r: r["session_step"])
    assert len(rows) == 2, [(r["status"], r["error_code"]) for r in rows]
    first, follow = rows
    assert all(r["status"] == "ok" and r["session_id"] == session for r in rows), rows
    assert first["tool_calls"] == 1 and first["input_tools"] > 0
    assert follow["tool_output_tokens"] >= tokens, (follow["tool_output_tokens"], tokens)
    assert follow["finish_reason"] == "stop" and not follow["tool_calls"]

    # the session's waterfall links the call to the step that carried its result
    costs = report["tool_costs"]
    (linked,) = costs["calls"]
    assert linked["tool"] == ALLOWED and linked["tokens"] == tokens, costs
    assert linked["first_step"] == 2 and linked["steps_carrying"] == 1, costs
    (tool,) = costs["tools"]
    assert tool["tool"] == ALLOWED and tool["calls"] == 1, costs
    assert tool["carried_tokens"] == tokens, costs
