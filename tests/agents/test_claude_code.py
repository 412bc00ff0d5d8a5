"""Claude Code itself (the ``claude`` CLI, npm ``@anthropic-ai/claude-code``) run headless
against a real gateway, with in-process simulated replicas behind a ``model_map`` that
sends every Claude model name to the self-hosted alias.

One agent turn that uses a tool: the simulated model (``tool_call_rate: 1.0``) answers
Claude Code's first request with a call to one of the read-only tools it offers; Claude
Code runs the tool and sends the result back; the engine answers that in text, and
Claude Code ends the turn. Then the ledger is checked: two ``messages`` rows of one
agent session, from client ``claude-cli``, with the prompt's tokens kept by source.

``scripts/test`` installs the pinned Claude Code into ``.npm-agents/`` (git-ignored).
Without it the test skips, but fails when ``CI=true``: there it must have been installed.

How the run is set up, and why (what this Claude Code sends, seen on the wire):

* ``--model claude-sonnet-4-5``: its default model (``claude-opus-5-5``, and
  ``claude-haiku-5-5`` for small tasks) puts the environment, the deferred tools and the
  skills in mid-conversation ``role: "system"`` messages (the beta
  ``per-turn-control-2026-07-01``), which the gateway does not accept; Sonnet 4.5 gets
  them in the first user message instead. ``ANTHROPIC_DEFAULT_HAIKU_MODEL`` does the
  same for the small-task model.
* ``CLAUDE_CODE_EXTRA_BODY`` adds ``stop_sequences``: the simulated engine writes every
  free-text answer out to ``max_tokens`` unless a stop sequence ends it, and Claude Code
  answers a ``max_tokens`` stop by asking the model to go on ("Output token limit
  hit...") -- with ``tool_call_rate: 1.0`` another tool call, for ever. With a stop
  sequence the text answer ends with ``end_turn``, as a real model's does.
* ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` keeps the answers short; ``MAX_THINKING_TOKENS=0``
  because Claude Code's smallest thinking budget (1024) must stay below ``max_tokens``.
* ``--tools`` offers only read-only tools (no permission prompt, no sub-agents: the
  simulated model picks its tool and arguments at random from what is offered).
* A fresh ``HOME`` and working directory, the documented switches against updates,
  telemetry and other non-essential traffic, and none of the caller's ANTHROPIC_ or
  CLAUDE_ variables.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.harness import GatewayThread, sim_config

ROOT = Path(__file__).resolve().parents[2]
LOCAL_CLAUDE = ROOT / ".npm-agents" / "node_modules" / ".bin" / "claude"
ALIAS = "sim-llama3-8b"
MODEL = "claude-sonnet-4-5"
TOOLS = ("Read", "Glob", "Grep")
STOP = "END_OF_ANSWER"
PROMPT = "Look at the files in this directory and tell me what they hold."


def claude_binary() -> str:
    """The project's pinned ``claude`` (``scripts/test`` installs it), else one on PATH;
    a skip without it, a failure under CI=true."""
    if os.access(LOCAL_CLAUDE, os.X_OK):
        return str(LOCAL_CLAUDE)
    found = shutil.which("claude")
    if found:
        return found
    why = (f"Claude Code is not installed ({LOCAL_CLAUDE.relative_to(ROOT)} nor `claude` on "
           "PATH): ./scripts/test installs it with npm")
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def claude_env(home: Path, base_url: str, key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    tmp = home / "tmp"
    tmp.mkdir()
    env.update({
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "CLAUDE_CODE_TMPDIR": str(tmp),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": key,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "claude-haiku-4-5",
        "CLAUDE_CODE_EXTRA_BODY": json.dumps({"stop_sequences": [STOP]}),
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "512",
        "MAX_THINKING_TOKENS": "0",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    })
    return env


def run_claude(binary: str, cwd: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    cmd = [binary, "-p", PROMPT, "--output-format", "stream-json", "--verbose",
           "--model", MODEL, "--tools", ",".join(TOOLS), "--allowedTools", ",".join(TOOLS),
           "--max-turns", "4", "--no-session-persistence", "--strict-mcp-config"]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=90,
                          stdin=subprocess.DEVNULL, check=False)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:], events[-1:])
    return events


def blocks(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The content blocks of type ``kind`` in the transcript's messages, in order."""
    out: list[dict[str, Any]] = []
    for e in events:
        content = (e.get("message") or {}).get("content") if e.get("type") in (
            "assistant", "user") else None
        if isinstance(content, list):
            out.extend(b for b in content if isinstance(b, dict) and b.get("type") == kind)
    return out


def test_claude_code_tool_turn_is_metered(tmp_path: Path) -> None:
    binary = claude_binary()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "notes.txt").write_text("Buy milk.\nCall the bank.\n")
    (work / "plan.md").write_text("# Plan\n\n1. Ship it.\n")
    cfg = sim_config(replicas=1, context_window=200_000)
    cfg["models"][0]["backends"][0]["sim"] = {"tool_call_rate": 1.0}
    cfg["model_map"] = [{"match": "*", "alias": ALIAS}]
    gw = GatewayThread(cfg, tmp_path / "gw").start()
    try:
        key = gw.create_key("default", department="eng", app="claude-code")
        env = claude_env(home, gw.base_url.removesuffix("/v1"), key)
        version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                 timeout=30, check=False, env=env).stdout
        assert "Claude Code" in version, version
        started = time.monotonic()
        events = run_claude(binary, work, env)
        took = time.monotonic() - started
    finally:
        gw.stop()
    assert took < 60, took

    # the transcript: the model called a tool, Claude Code ran it and sent its result,
    # the model answered in text and the turn ended there
    result = events[-1]
    assert result["type"] == "result", events[-3:]
    assert result["subtype"] == "success" and result["is_error"] is False, result
    assert result["num_turns"] == 2 and result["stop_reason"] == "end_turn", result
    assert result["result"].strip(), result
    uses, answers = blocks(events, "tool_use"), blocks(events, "tool_result")
    assert len(uses) == 1 and uses[0]["name"] in TOOLS, uses
    assert [a["tool_use_id"] for a in answers] == [uses[0]["id"]], answers
    session = result["session_id"]

    rows = sorted(gw.ledger_rows("app = 'claude-code'"), key=lambda r: r["session_step"])
    assert len(rows) == 2, [(r["status"], r["error_code"]) for r in rows]
    first, follow = rows
    for r in rows:
        assert r["status"] == "ok" and r["operation"] == "messages", r
        assert r["model"] == ALIAS and r["stream"] == 1
        assert r["client"].startswith("claude"), r["client"]  # User-Agent: claude-cli/<v>
        assert r["session_id"] == session  # x-claude-code-session-id
        assert r["input_system"] > 0 and r["input_tools"] > 0 and r["input_user"] > 0, r
        assert r["input_tokens"] == (r["input_system"] + r["input_tools"] + r["input_user"]
                                     + (r["input_history"] or 0) + (r["input_context"] or 0))
        # the engine's own count, as the gateway counted it before sending
        assert r["usage_source"] == "upstream"
        assert r["input_tokens"] == r["estimated_input_tokens"]
        assert r["output_tokens"] > 0
    assert [first["session_step"], follow["session_step"]] == [1, 2]
    assert first["tool_calls"] == 1 and first["finish_reason"] == "tool_calls"
    assert not first["input_history"]  # the first request has no earlier turns
    # the follow-up carries the assistant's tool call (history) and the tool's result
    assert follow["input_history"] > 0 and follow["tool_output_tokens"] > 0, follow
    assert follow["finish_reason"] == "stop" and not follow["tool_calls"]
    assert follow["input_system"] == first["input_system"]
    assert follow["input_tools"] == first["input_tools"]
    # what Claude Code was told it spent is what the ledger keeps
    usage = result["modelUsage"][MODEL]
    told = (usage["inputTokens"] + usage["cacheReadInputTokens"]
            + usage["cacheCreationInputTokens"])
    assert told == sum(r["input_tokens"] for r in rows)
    assert usage["outputTokens"] == sum(r["output_tokens"] for r in rows)
    assert follow["cached_input_tokens"] > 0  # the first prompt, in the prefix cache
