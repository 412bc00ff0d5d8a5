"""Anthropic Messages prompts counted by the gateway (issue 26); prints JSON.

Two parts (``--part counts``, ``--part claude-code``, or both by default):

``counts``: 1,000 varied Messages requests (seeded, ``tests/gateway/messages_corpus.py``:
system as a string or blocks, 0-20 tools, multi-turn history with tool_use /
tool_result, thinking blocks, base64 PNG images, text-source documents) sent to a gateway
with an in-process simulated engine (``tests/gateway/harness.py``: the engine counts the
prompt with the alias' tokenizer and chat template) as ``POST /v1/messages/count_tokens``
and as a ``max_tokens: 1`` create. The gateway's counts (count_tokens' ``input_tokens``;
the ledger's ``estimated_input_tokens``, the gateway's pre-call count on the token path)
against the engine's (the answer's ``input_tokens`` + cache reads + cache writes).
Target: 1,000 / 1,000.

``claude-code``: a Claude Code-sized first request (~76 KB: a long system prompt, 20
tools with realistic JSON schemas, one user turn) counted by source in process, on the
counter the token path uses (``build_counters(config)``, the gateway's own, then
``counters.count(model, MESSAGES, canonical)`` with the canonical body from
``to_chat``), and ``to_chat`` itself. Cold: a fresh segment cache for every sample (the
system prompt and tools never seen; the tokenizer loaded). Warm: the same system prompt
and tools seen before, a new user turn each sample (the steady state of an agent's
session). p50 / p95 of the process CPU time (all its threads: a tokenizer's batch may
use several) and of wall time. Target: warm p50 < 1 ms.

    python bench/bench_messages_counts.py [--part counts|claude-code] [--requests 1000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.gateway import messages_corpus as mc
from tests.gateway.harness import GatewayThread

from tokenplane.compose.config_file import validate_config
from tokenplane.compose.preflight import build_counters
from tokenplane.dialects.anthropic.request import to_chat
from tokenplane.operations.messages import MESSAGES
from tokenplane.tokens.registry import TokenizerRegistry

_SENTENCES = [
    "You are an interactive CLI tool that helps users with software engineering tasks.",
    "Use the instructions below and the tools available to you to assist the user.",
    "IMPORTANT: Assist with defensive security tasks only; refuse to create malicious code.",
    "You should be concise, direct, and to the point when you answer the user.",
    "When you run a non-trivial bash command, explain what the command does and why.",
    "Remember that your output will be displayed on a command line interface.",
    "Only use emojis if the user explicitly requests it; avoid them in all communication.",
    "Never introduce code that exposes or logs secrets and keys; never commit secrets.",
    "Prefer editing existing files in the codebase; never write new files unless required.",
    "When making changes to files, first understand the file's code conventions.",
    "NEVER assume that a given library is available, even if it is well known.",
    "Always follow security best practices and check the neighbouring files first.",
    "Use the TodoWrite tool to plan the task if it has more than three steps.",
    "Run the lint and typecheck commands (eg. npm run lint, ruff, mypy) when you finish.",
    "You MUST answer concisely with fewer than 4 lines of text unless asked for detail.",
    "When referencing specific functions, include the pattern `file_path:line_number`.",
    "The user will primarily request you perform software engineering tasks: solving bugs, "
    "adding new functionality, refactoring code, explaining code, and more.",
    "Batch independent tool calls in a single message so that they run in parallel.",
    "If the user asks for help or wants to give feedback inform them of /help and /bug.",
    "Do not add comments to the code you write unless the user asks you to.",
]
_EXAMPLES = [
    "<example>\nuser: 2 + 2\nassistant: 4\n</example>",
    "<example>\nuser: is 11 a prime number?\nassistant: Yes\n</example>",
    "<example>\nuser: what command should I run to list files in the current directory?\n"
    "assistant: ls\n</example>",
    "<example>\nuser: Run the build and fix any type errors\nassistant: I'm going to use the "
    "TodoWrite tool to write the following items to the todo list:\n- Run the build\n- Fix "
    "any type errors\n</example>",
    "```bash\ngit status && git diff HEAD --stat && git log -n 5 --oneline\n```",
    "```python\ndef main() -> None:\n    args = parse_args()\n    run(args)\n```",
]
_TOOL_SPECS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("Bash", {"command": "string", "timeout": "number", "description": "string",
              "run_in_background": "boolean"}, ["command"]),
    ("Read", {"file_path": "string", "offset": "number", "limit": "number"}, ["file_path"]),
    ("Edit", {"file_path": "string", "old_string": "string", "new_string": "string",
              "replace_all": "boolean"}, ["file_path", "old_string", "new_string"]),
    ("MultiEdit", {"file_path": "string", "edits": "edits"}, ["file_path", "edits"]),
    ("Write", {"file_path": "string", "content": "string"}, ["file_path", "content"]),
    ("Glob", {"pattern": "string", "path": "string"}, ["pattern"]),
    ("Grep", {"pattern": "string", "path": "string", "glob": "string",
              "output_mode": "mode", "-A": "number", "-B": "number", "-C": "number",
              "-i": "boolean", "-n": "boolean", "type": "string", "head_limit": "number",
              "multiline": "boolean"}, ["pattern"]),
    ("LS", {"path": "string", "ignore": "strings"}, ["path"]),
    ("Task", {"description": "string", "prompt": "string", "subagent_type": "string"},
     ["description", "prompt", "subagent_type"]),
    ("TodoWrite", {"todos": "todos"}, ["todos"]),
    ("WebFetch", {"url": "string", "prompt": "string"}, ["url", "prompt"]),
    ("WebSearch", {"query": "string", "allowed_domains": "strings",
                   "blocked_domains": "strings"}, ["query"]),
    ("NotebookEdit", {"notebook_path": "string", "cell_id": "string", "new_source": "string",
                      "cell_type": "cell", "edit_mode": "edit"},
     ["notebook_path", "new_source"]),
    ("ExitPlanMode", {"plan": "string"}, ["plan"]),
    ("BashOutput", {"bash_id": "string", "filter": "string"}, ["bash_id"]),
    ("KillShell", {"shell_id": "string"}, ["shell_id"]),
    ("SlashCommand", {"command": "string"}, ["command"]),
    ("AskUserQuestion", {"questions": "strings"}, ["questions"]),
    ("Skill", {"command": "string"}, ["command"]),
    ("ListMcpResourcesTool", {"server": "string"}, []),
]


def _prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        r = rng.random()
        if r < 0.08:
            piece = "\n\n# " + rng.choice(["Tone and style", "Proactiveness", "Doing tasks",
                                            "Tool usage policy", "Code References",
                                            "Following conventions", "Task Management"])
        elif r < 0.16:
            piece = "\n" + rng.choice(_EXAMPLES) + "\n"
        elif r < 0.4:
            piece = "\n- " + rng.choice(_SENTENCES)
        else:
            piece = " " + rng.choice(_SENTENCES)
        out.append(piece)
        size += len(piece)
    return "".join(out).strip()


def _prop(rng: random.Random, kind: str) -> dict[str, Any]:
    desc = _prose(rng, rng.randint(40, 200)).replace("\n", " ")
    if kind == "strings":
        return {"type": "array", "items": {"type": "string"}, "description": desc}
    if kind == "mode":
        return {"type": "string", "enum": ["content", "files_with_matches", "count"],
                "description": desc}
    if kind == "cell":
        return {"type": "string", "enum": ["code", "markdown"], "description": desc}
    if kind == "edit":
        return {"type": "string", "enum": ["replace", "insert", "delete"], "description": desc}
    if kind == "edits":
        return {"type": "array", "minItems": 1, "description": desc, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["old_string", "new_string"], "properties": {
                "old_string": {"type": "string", "description": "The text to replace"},
                "new_string": {"type": "string", "description": "The text to replace it with"},
                "replace_all": {"type": "boolean", "default": False,
                                "description": "Replace all occurences of old_string"}}}}
    if kind == "todos":
        return {"type": "array", "description": desc, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["content", "status", "activeForm"], "properties": {
                "content": {"type": "string", "minLength": 1},
                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                "activeForm": {"type": "string", "minLength": 1}}}}
    return {"type": kind, "description": desc}


def claude_code_request(seed: int = 76, size: int = 76_000) -> dict[str, Any]:
    """A Claude Code-sized first request: a long system prompt (two text blocks, the
    second cached), 20 tools with JSON schemas and long descriptions, one user turn;
    about ``size`` bytes of JSON, a little over half of it the system prompt."""
    rng = random.Random(seed)
    tools = []
    for name, props, required in _TOOL_SPECS:
        schema: dict[str, Any] = {
            "type": "object", "properties": {k: _prop(rng, t) for k, t in props.items()},
            "additionalProperties": False, "$schema": "http://json-schema.org/draft-07/schema#"}
        if required:
            schema["required"] = required
        tools.append({"name": name, "description": _prose(rng, rng.randint(400, 2400)),
                      "input_schema": schema})
    tools_bytes = len(orjson.dumps(tools))
    system_chars = max(1000, size - tools_bytes - 400)
    system = [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for "
               "Claude."},
              {"type": "text", "text": _prose(rng, system_chars),
               "cache_control": {"type": "ephemeral"}}]
    return {"model": mc.ALIAS, "max_tokens": 32000, "system": system, "tools": tools,
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\nAs you answer the user's "
                 "questions, you can use the following context: ...\n</system-reminder>"},
                {"type": "text", "text": "Fix the failing test in tests/test_api.py"}]}],
            "metadata": {"user_id": "user_0123_account__session_4567"}}


def _pcts(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"p50": round(s[len(s) // 2], 4), "p95": round(s[int(len(s) * 0.95)], 4),
            "min": round(s[0], 4), "n": len(s)}


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[float, float, Any]:
    """(process CPU ms, all threads; wall ms; result) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn(*args)
    return 1e3 * (time.process_time() - c0), 1e3 * (time.perf_counter() - w0), out


def claude_code(args: argparse.Namespace) -> dict[str, Any]:
    body = claude_code_request()
    config = validate_config(mc.gateway_config())
    model = config.models[0]
    registry = TokenizerRegistry()
    counters = build_counters(config, registry)  # the gateway's own (app.py)
    canonical = to_chat(body)
    c1, w1, result = _timed(counters.count, model, MESSAGES, canonical)
    expected = len(counters.prompt_ids(model.alias).messages(canonical["messages"],
                                                              canonical.get("tools")))
    out: dict[str, Any] = {
        "request_bytes": len(orjson.dumps(body)),
        "system_chars": sum(len(b["text"]) for b in body["system"]),
        "tools": len(body["tools"]), "tools_bytes": len(orjson.dumps(body["tools"])),
        "prompt_tokens": result.counts.prompt, "engine_tokens": expected,
        "exact": result.counts.prompt == expected,
        "by_source": {k: getattr(result.counts, k)
                      for k in ("system", "history", "context", "tools", "user")},
        "first_count_ms": {"cpu": round(c1, 3), "wall": round(w1, 3),
                           "note": "the process's first count (fresh tokenizer memos)"},
    }
    rng = random.Random(1)
    raw = orjson.dumps(body)
    # to_chat on the parsed body (what the operation's canonical() runs), and the parse
    t_cpu, t_wall, p_cpu = [], [], []
    for _ in range(args.samples):
        pc, _, parsed = _timed(orjson.loads, raw)
        c2, w2, _ = _timed(to_chat, parsed)
        t_cpu.append(c2)
        t_wall.append(w2)
        p_cpu.append(pc)
    out["to_chat_ms"] = {"cpu": _pcts(t_cpu), "wall": _pcts(t_wall)}
    out["orjson_loads_ms"] = {"cpu": _pcts(p_cpu)}
    # cold: a fresh segment cache (the gateway's own counters, rebuilt) every sample
    cold_cpu, cold_wall = [], []
    for i in range(args.cold_samples):
        fresh = build_counters(config, registry)
        b = {**body, "messages": [{"role": "user", "content": f"task {i}: fix the bug"}]}
        canon = to_chat(b)
        c, w, _ = _timed(fresh.count, model, MESSAGES, canon)
        cold_cpu.append(c)
        cold_wall.append(w)
    out["cold_count_ms"] = {"cpu": _pcts(cold_cpu), "wall": _pcts(cold_wall)}
    # warm: the same counters; the system prompt and tools seen; a new user turn each
    warm_cpu, warm_wall, tc_cpu = [], [], []
    for i in range(args.samples):
        words = " ".join(rng.choice(_SENTENCES) for _ in range(rng.randint(1, 4)))
        b = {**body, "messages": [{"role": "user", "content": [
            {"type": "text", "text": f"{i}: {words}"}]}]}
        c0, _, canon = _timed(to_chat, b)
        c, w, _ = _timed(counters.count, model, MESSAGES, canon)
        warm_cpu.append(c)
        warm_wall.append(w)
        tc_cpu.append(c0 + c)
    out["warm_count_ms"] = {"cpu": _pcts(warm_cpu), "wall": _pcts(warm_wall)}
    out["warm_to_chat_plus_count_cpu_ms"] = _pcts(tc_cpu)
    out["target_warm_p50_under_1ms"] = out["warm_count_ms"]["cpu"]["p50"] < 1.0
    return out


def counts(args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.perf_counter()
    bodies = mc.corpus(args.requests, args.seed)
    sizes = sorted(len(orjson.dumps(b)) for b in bodies)
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayThread(mc.gateway_config(), Path(tmp)).start()
        key = gw.create_key("default", app="counts")
        report = mc.check_counts(bodies, gw, key)
    out = report.summary()
    out["tool_cache_control_requests"] = sum(mc.tool_cache_control(b) for b in bodies)
    plain = [o for o, b in zip(report.outcomes, bodies, strict=True)
             if not mc.tool_cache_control(b)]
    out["ledger_estimate_eq_engine_without_tool_cache_control"] = (
        f"{sum(o.estimated == o.engine for o in plain)}/{len(plain)}")
    out["request_bytes"] = {"min": sizes[0], "median": sizes[len(sizes) // 2],
                            "max": sizes[-1]}
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--part", choices=["counts", "claude-code"])
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--samples", type=int, default=500, help="warm and to_chat samples")
    ap.add_argument("--cold-samples", type=int, default=40)
    args = ap.parse_args()
    result: dict[str, Any] = {"bench": "messages_counts"}
    if args.part in (None, "claude-code"):
        result["claude_code"] = claude_code(args)
    if args.part in (None, "counts"):
        result["counts"] = counts(args)
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
