"""Agent sessions end to end: an openai-SDK tool loop through the gateway to the
simulated engine, its waterfall from the admin API and the CLI (equal to the
ledger), a session budget cutting a loop with a 429 naming the session, the
tool-output policy applied exactly, and tenant isolation of the session endpoints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from tests.gateway.harness import GatewayThread, sim_config
from tokenplane.cli.main import build_cli
from tokenplane.config.sessions_schema import ToolOutputConfig
from tokenplane.sessions.tool_output import head_tail, keep_fields
from tokenplane.tokens.registry import TokenizerRegistry

MODEL = "sim-llama3-8b"
TOK = TokenizerRegistry().get("tiktoken:cl100k_base")  # offline, as the gateway loads it
CAP = 1500
MONEY_CAP = "0.0002"  # 200 micro-USD: a few steps at 0.10 / 0.40 USD per 1M tokens
TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "search", "description": "Search the product catalogue.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"]}}}]
SYSTEM = "You are a shopping agent. Use the search tool, then answer."


def tool_result(step: int) -> str:
    """A tool's output that grows with the step (web pages, logs, tables...)."""
    rows = [{"sku": f"SKU-{step}-{i}", "title": f"Blue kettle model {i}",
             "price": 20 + i, "stock": i * 3} for i in range(step * 4)]
    return json.dumps(rows)


def session_headers(sid: str, step: int | None = None) -> dict[str, str]:
    h = {"x-tokenplane-session": sid}
    if step is not None:
        h["x-tokenplane-step"] = str(step)
    return h


def agent_step(c: OpenAI, messages: list[Any], sid: str, step: int, **kw: Any) -> Any:
    """One step of the loop: ask, then append the assistant turn and the results of
    its tool calls (the engine's calls when it made some, else one the client makes:
    the gateway counts what the client sends)."""
    raw = c.chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, tools=TOOLS, max_tokens=64, tool_choice="required",
        extra_headers=session_headers(sid), **kw)
    assert raw.headers["x-tokenplane-session"] == sid
    assert raw.headers["x-tokenplane-step"] == str(step)
    resp = raw.parse()
    msg = resp.choices[0].message
    calls = [{"id": tc.id, "type": "function",
              "function": {"name": tc.function.name, "arguments": tc.function.arguments}}
             for tc in (msg.tool_calls or [])]
    if not calls:
        calls = [{"id": f"call_{step}", "type": "function",
                  "function": {"name": "search", "arguments": json.dumps({"query": "kettle"})}}]
    messages.append({"role": "assistant", "content": msg.content or "", "tool_calls": calls})
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call["id"],
                         "content": tool_result(step)})
    return raw, resp, calls


class Sessions:
    def __init__(self, gw: GatewayThread, keys: dict[str, str], log: dict[str, Any]) -> None:
        self.gw, self.keys, self.log = gw, keys, log

    def get(self, path: str, key: str, **params: Any) -> httpx.Response:
        return httpx.get(self.gw.base_url.removesuffix("/v1") + path, params=params,
                         headers={"authorization": f"Bearer {key}"}, timeout=30)


def config() -> dict[str, Any]:
    cfg = sim_config(replicas=1)
    cfg["tenants"].append({"name": "globex"})
    # reserve max_tokens exactly (no prediction): the session cap is then never overshot
    cfg["admission"] = {"predict_output": False}
    cfg["sessions"] = {
        "tool_output": {"max_result_tokens": 1000, "max_growth_tokens": 400},
        "overrides": [
            {"tenant": "acme", "app": "capped", "budget": {"max_tokens": CAP}},
            {"tenant": "acme", "app": "money", "budget": {"max_cost": MONEY_CAP}},
            {"tenant": "acme", "app": "trunc",
             "tool_output": {"max_result_tokens": 64, "action": "truncate",
                             "head_share": 0.25}},
            {"tenant": "acme", "app": "fields",
             "tool_output": {"max_result_tokens": 64, "action": "keep_fields",
                             "fields": ["sku", "price"]}},
        ],
    }
    return cfg


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sessions]:
    home = Path(tmp_path_factory.mktemp("sessions"))
    first = GatewayThread(config(), home).start()
    keys = {name: first.create_key(tenant, app=app) for name, (tenant, app) in {
        "agent": ("acme", "agent"), "capped": ("acme", "capped"), "trunc": ("acme", "trunc"),
        "fields": ("acme", "fields"), "money": ("acme", "money"),
        "globex": ("globex", "crm")}.items()}
    keys["admin"] = first.create_key("default", admin=True)
    log: dict[str, Any] = {}
    with OpenAI(base_url=first.base_url, api_key=keys["agent"], max_retries=0) as c:
        messages: list[Any] = [{"role": "system", "content": SYSTEM},
                               {"role": "user", "content": "Find me a cheap blue kettle."}]
        steps = []
        for step in range(1, 6):
            raw, resp, calls = agent_step(c, messages, "trip-42", step)
            steps.append({"usage": resp.usage, "calls": len(resp.choices[0].message.tool_calls
                                                             or []),
                          "flags": raw.headers.get("x-tokenplane-tool-output", ""),
                          "appended": [len(TOK.encode(tool_result(step))) for _ in calls]})
        log["agent"] = steps
        log["stream"] = stream_step(c, messages)
    log["capped"] = run_capped(first, keys["capped"])
    log["money"] = run_capped(first, keys["money"], "money-1")
    for app in ("trunc", "fields"):
        log[app] = run_policy(first, keys[app], app)
    log["metrics"] = httpx.get(first.metrics_url, timeout=10).text
    first.stop()  # drains the journal into the ledger
    second = GatewayThread(config(), home).start()
    yield Sessions(second, keys, log)
    second.stop()


def stream_step(c: OpenAI, messages: list[Any]) -> dict[str, Any]:
    """Step 6, streamed: the tool calls are counted from the stream's deltas."""
    raw = c.chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, tools=TOOLS, max_tokens=64, tool_choice="required",
        stream=True, stream_options={"include_usage": True},
        extra_headers=session_headers("trip-42"))
    assert raw.headers["x-tokenplane-step"] == "6"  # on a stream's head too
    chunks = list(raw.parse())
    calls = {(ch.choices[0].index, tc.index) for ch in chunks if ch.choices
             for tc in (ch.choices[0].delta.tool_calls or []) if tc.id}
    usage = next(ch.usage for ch in chunks if ch.usage is not None)
    return {"calls": len(calls), "usage": usage}


def expected_added(seen: list[dict[str, Any]], step: int) -> int:
    """Tool-output tokens the client appended after step ``step - 1``'s answer."""
    return 0 if step == 1 else sum(seen[step - 2]["appended"])


def test_agent_loop_waterfall_matches_the_ledger(sessions: Sessions) -> None:
    resp = sessions.get("/admin/v1/sessions/trip-42", sessions.keys["agent"])
    assert resp.status_code == 200, resp.text
    report = resp.json()
    assert report["tenant"] == "acme" and report["app"] == "agent"
    steps = report["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6]
    seen = sessions.log["agent"]
    streamed = sessions.log["stream"]
    seen = [*seen, {"usage": streamed["usage"], "calls": streamed["calls"], "appended": [],
                    "flags": steps[5]["flags"]}]
    assert all(s["calls"] >= 1 for s in seen)  # tool_choice required: the engine calls
    rows = {r["session_step"]: r for r in sessions.gw.ledger_rows("session_id = 'trip-42'")}
    for s, client_side in zip(steps, seen, strict=True):
        n = s["step"]
        row = rows[n]
        usage = client_side["usage"]
        assert s["input_tokens"] == usage.prompt_tokens == row["input_tokens"]
        assert s["output_tokens"] == usage.completion_tokens == row["output_tokens"]
        assert s["tool_output_added"] == expected_added(seen, n) == row["tool_output_added"]
        assert s["tool_output_tokens"] == sum(expected_added(seen, k) for k in range(1, n + 1))
        assert s["tool_calls"] == client_side["calls"] == row["tool_calls"]
        assert s["cost_micros"] == row["cost_micros"] > 0
        assert s["tools"] == row["input_tools"] > 0  # the tool definitions, every step
        assert s["context"] == row["input_context"] >= s["tool_output_tokens"]
        assert s["latency_ms"] is not None and s["latency_ms"] >= 0
    # growth over 400 tokens per step is flagged from the step whose new results pass it
    for s, client_side in zip(steps[:5], seen[:5], strict=True):
        grows = s["tool_output_added"] > 400
        assert ("context_growth" in s["flags"]) == grows
        assert ("context_growth" in client_side["flags"]) == grows
    assert any("context_growth" in s["flags"] for s in steps)
    total = report["total"]
    assert total["steps"] == 6
    assert total["tool_calls"] == sum(s["calls"] for s in seen)
    assert total["input_tokens"] == sum(r["input_tokens"] for r in rows.values())
    assert total["cost_micros"] == sum(r["cost_micros"] for r in rows.values())


def test_growth_flag_is_a_metric(sessions: Sessions) -> None:
    samples = {(s.labels["flag"], s.labels["tenant"]): s.value
               for fam in text_string_to_metric_families(sessions.log["metrics"])
               for s in fam.samples if s.name == "tokenplane_session_tool_output_total"}
    # every flagged request of the first gateway (all of them name a session)
    first = ("trip-42", "capped-1", "capped-2", "money-1", "money-2", "trunc-1", "fields-1")
    rows = sessions.gw.ledger_rows(f"session_id IN {first!r}")
    growth = sum("context_growth" in json.loads(r["flags"]) for r in rows)
    assert samples[("tool_output_truncated", "acme")] == 2  # trunc-1 and fields-1
    assert samples[("context_growth", "acme")] == growth > 0


def test_usage_cli_prints_the_waterfall_and_its_png(sessions: Sessions, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKENPLANE_DATABASE_URL", raising=False)
    home = str(sessions.gw.home)
    png = tmp_path / "trip.png"
    run = CliRunner().invoke(build_cli(), ["usage", "session", "trip-42", "--home", home,
                                           "--format", "json", "--png", str(png)])
    assert run.exit_code == 0, run.output
    api = sessions.get("/admin/v1/sessions/trip-42", sessions.keys["admin"]).json()
    assert json.loads(run.output) == api
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    table = CliRunner().invoke(build_cli(), ["usage", "session", "trip-42", "--home", home])
    assert table.exit_code == 0, table.output
    assert "tool_output_added" in table.output and "total" in table.output
    assert "6 steps" in table.output
    missing = CliRunner().invoke(build_cli(), ["usage", "session", "nope", "--home", home])
    assert missing.exit_code == 1
    listed = CliRunner().invoke(build_cli(), ["usage", "sessions", "--home", home,
                                              "--format", "json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    api_rows = sessions.get("/admin/v1/sessions", sessions.keys["admin"]).json()["data"]
    assert rows == api_rows
    trip = next(r for r in rows if r["session_id"] == "trip-42")
    assert trip["steps"] == 6 and trip["max_step"] == 6
    assert trip["cost_micros"] == api["total"]["cost_micros"]
    costs = [r["cost_micros"] for r in rows]
    assert costs == sorted(costs, reverse=True)


def run_capped(gw: GatewayThread, key: str, sid: str = "capped-1") -> dict[str, Any]:
    """An agent loop in a capped session, until the cap refuses a step."""
    with OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as c:
        messages: list[Any] = [{"role": "system", "content": SYSTEM},
                               {"role": "user", "content": "Find me a cheap blue kettle."}]
        done = 0
        try:
            for step in range(1, 50):
                agent_step(c, messages, sid, step)
                done = step
        except openai.RateLimitError as exc:
            refused: Any = exc.body
        else:
            refused = None
        # another session of the same app is not refused
        agent_step(c, [{"role": "user", "content": "hi"}], sid.replace("-1", "-2"), 1)
    return {"done": done, "refused": refused}


def test_session_budget_cuts_the_loop_with_a_429_naming_the_session(
        sessions: Sessions) -> None:
    done, body = sessions.log["capped"]["done"], sessions.log["capped"]["refused"]
    assert done >= 2
    assert isinstance(body, dict), "the cap never refused a step"
    assert body["code"] == "session_budget_exceeded"
    assert body["type"] == "rate_limit_error"
    assert "capped-1" in body["message"] and str(CAP) in body["message"]
    assert "this step needs" in body["message"]
    assert body["param"] == "x-tokenplane-session"
    usage = sessions.get("/admin/v1/sessions/capped-1", sessions.keys["capped"]).json()
    # reserved step by step: the refused step reached no upstream, and the session
    # spent at most its cap
    assert usage["total"]["total_tokens"] <= CAP
    assert usage["total"]["steps"] == done + 1  # the refused step is in the ledger too
    assert usage["steps"][-1]["status"] == "error"
    assert usage["steps"][-1]["input_tokens"] == 0
    assert len([s for s in usage["steps"] if s["status"] == "ok"]) == done
    other = sessions.get("/admin/v1/sessions/capped-2", sessions.keys["capped"]).json()
    assert other["total"]["steps"] == 1


def test_a_money_cap_cuts_the_loop_too(sessions: Sessions) -> None:
    done, body = sessions.log["money"]["done"], sessions.log["money"]["refused"]
    assert done >= 1 and isinstance(body, dict)
    assert body["code"] == "session_budget_exceeded"
    assert "money-1" in body["message"] and "0.000200 USD per session" in body["message"]
    usage = sessions.get("/admin/v1/sessions/money-1", sessions.keys["money"]).json()
    assert 0 < usage["total"]["cost_micros"] <= 200
    assert usage["total"]["steps"] == done + 1


def policy_of(app: str) -> ToolOutputConfig:
    over = next(o for o in config()["sessions"]["overrides"] if o["app"] == app)
    return ToolOutputConfig(**over["tool_output"])


def shrunk_by_hand(big: str, app: str) -> str:
    cfg = policy_of(app)
    kept = keep_fields(big, cfg.fields) if app == "fields" else None
    assert cfg.max_result_tokens is not None
    return head_tail(kept or big, cfg.max_result_tokens, cfg.head_share, cfg.marker, TOK,
                     TOK.count)


def run_policy(gw: GatewayThread, key: str, app: str) -> dict[str, Any]:
    """A step whose tool result is over the size, and the same request carrying the
    result shrunk by hand (no session: it is under the size then)."""
    big = tool_result(12)  # ~1,200 tokens, over the 64-token size
    msgs: list[Any] = [
        {"role": "user", "content": "kettles?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": big}]
    with OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as c:
        sent = c.chat.completions.with_raw_response.create(
            model=MODEL, messages=msgs, max_tokens=4, tools=TOOLS,
            extra_headers=session_headers(f"{app}-1"))
        by_hand = [*msgs[:2], {**msgs[2], "content": shrunk_by_hand(big, app)}]
        same = c.chat.completions.create(model=MODEL, messages=by_hand, max_tokens=4,
                                         tools=TOOLS)
    usage = sent.parse().usage
    assert usage is not None and same.usage is not None
    return {"flags": sent.headers.get("x-tokenplane-tool-output"),
            "sent": usage.prompt_tokens, "same": same.usage.prompt_tokens,
            "big": len(TOK.encode(big))}


@pytest.mark.parametrize("app", ["trunc", "fields"])
def test_tool_output_policy_applies_exactly(sessions: Sessions, app: str) -> None:
    """What the engine is sent is exactly the locally shrunk result: its prompt counts
    the same as a request carrying that text itself; the ledger says what was removed."""
    got = sessions.log[app]
    shrunk = shrunk_by_hand(tool_result(12), app)
    n = len(TOK.encode(shrunk))
    assert 48 <= n <= 64  # at most the size, and not far below it
    assert got["flags"] == "tool_output_large,tool_output_truncated"
    assert got["sent"] == got["same"]
    if app == "fields":
        assert '"sku"' in shrunk and '"title"' not in shrunk
    else:
        assert "tokens of tool output removed by tokenplane" in shrunk
        assert shrunk.startswith(tool_result(12)[:10])
        assert shrunk.endswith(tool_result(12)[-5:])
    step = sessions.get(f"/admin/v1/sessions/{app}-1", sessions.keys[app]).json()["steps"][0]
    assert step["tool_output_tokens"] == n
    assert step["tool_output_removed"] == got["big"] - n
    assert step["flags"] == "tool_output_large,tool_output_truncated"
    assert step["input_tokens"] == got["sent"]


def test_tenant_isolation_of_the_session_endpoints(sessions: Sessions) -> None:
    globex, acme = sessions.keys["globex"], sessions.keys["agent"]
    hidden = sessions.get("/admin/v1/sessions/trip-42", globex)
    assert hidden.status_code == 404
    err = hidden.json()["error"]
    assert err["code"] == "session_not_found" and "acme" not in err["message"]
    assert sessions.get("/admin/v1/sessions/trip-42", acme).status_code == 200
    assert sessions.get("/admin/v1/sessions", globex).json()["data"] == []
    assert sessions.get("/admin/v1/sessions", globex, tenant="acme").status_code == 403
    mine = sessions.get("/admin/v1/sessions", acme).json()["data"]
    assert mine and {r["tenant"] for r in mine} == {"acme"}
    bad = sessions.get("/admin/v1/sessions/bad id!", acme)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "session_id"
    assert sessions.get("/admin/v1/sessions", acme, order="colour").status_code == 400


@pytest.mark.parametrize(("headers", "metadata", "param"), [
    ({"x-tokenplane-session": "bad id"}, None, "x-tokenplane-session"),
    ({"x-tokenplane-session": "x" * 129}, None, "x-tokenplane-session"),
    ({"x-tokenplane-session": "ok", "x-tokenplane-step": "0"}, None, "x-tokenplane-step"),
    ({"x-tokenplane-session": "ok", "x-tokenplane-step": "two"}, None, "x-tokenplane-step"),
    ({"x-tokenplane-step": "2"}, None, "x-tokenplane-step"),
    ({"x-tokenplane-session": "a"}, {"tokenplane_session": "b"}, "metadata.tokenplane_session"),
    ({}, {"tokenplane_session": "ok", "tokenplane_step": "-1"}, "metadata.tokenplane_step"),
])
def test_bad_session_names_are_400s(sessions: Sessions, headers: dict[str, str],
                                    metadata: dict[str, str] | None, param: str) -> None:
    with OpenAI(base_url=sessions.gw.base_url, api_key=sessions.keys["agent"],
                max_retries=0) as c:
        extra = {"metadata": metadata} if metadata is not None else {}
        with pytest.raises(openai.BadRequestError) as err:
            c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}],
                                      max_tokens=2, extra_headers=headers, **extra)
    body = err.value.body
    assert isinstance(body, dict) and body["param"] == param
    assert body["type"] == "invalid_request_error"


def test_metadata_names_the_session_and_step(sessions: Sessions) -> None:
    with OpenAI(base_url=sessions.gw.base_url, api_key=sessions.keys["agent"],
                max_retries=0) as c:
        raw = c.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=2,
            metadata={"tokenplane_session": "meta-1", "tokenplane_step": "7", "mine": "kept"})
        assert raw.headers["x-tokenplane-session"] == "meta-1"
        assert raw.headers["x-tokenplane-step"] == "7"
        nxt = c.chat.completions.with_raw_response.create(
            model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=2,
            extra_headers=session_headers("meta-1"))
        assert nxt.headers["x-tokenplane-step"] == "8"  # the next number in the session
