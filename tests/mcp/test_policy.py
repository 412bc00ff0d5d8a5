"""The MCP gateway's pure parts: globs, permissions, argument rules, limits, names,
JSON-RPC parsing and result truncation."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tokenplane.auth.principal import Principal
from tokenplane.config.mcp_schema import McpConfig
from tokenplane.mcp import jsonrpc
from tokenplane.mcp.arguments import ArgumentRule, check_schema, schema_problem
from tokenplane.mcp.globs import GlobSet
from tokenplane.mcp.limits import InFlight, RateLog, RateRule
from tokenplane.mcp.names import qualify, qualify_uri, split, split_uri
from tokenplane.mcp.policy import McpPolicy
from tokenplane.mcp.results import result_texts, structured_json, truncate
from tokenplane.tokens.registry import TokenizerRegistry


def test_globs_match_like_fnmatch() -> None:
    g = GlobSet(["fs__read", "crm__*", "git__[ab]*", "x__?y"])
    assert g.matches("fs__read") and not g.matches("fs__reader")
    assert g.matches("crm__lookup") and g.matches("crm__")
    assert g.matches("git__add") and not g.matches("git__commit")
    assert g.matches("x__zy") and not g.matches("x__zzy")
    assert GlobSet(["*"]).matches("anything") and not GlobSet([]).matches("a")
    assert g.may_match_prefix("git__") and g.may_match_prefix("fs__")
    assert not g.may_match_prefix("db__")
    assert GlobSet(["*"]).may_match_prefix("db__")


def _policy(**extra: Any) -> McpPolicy:
    cfg = {"servers": [{"name": "fs", "url": "http://h/mcp",
                        "tools": {"rm": {"destructive": True}}},
                       {"name": "db", "url": "http://h/mcp"}],
           "rules": [
               {"tenant": "a", "allow": ["fs__*"], "deny": ["fs__secret*"],
                "arguments": [{"tool": "fs__read", "argument": "path",
                               "pattern": "/srv/"}]},
               {"tenant": "a", "app": "ops", "allow": ["db__query"]},
               {"key": "key_1", "allow": ["db__*"]},
           ], **extra}
    return McpPolicy(McpConfig.model_validate(cfg))


def test_rules_match_tenant_app_and_key_and_deny_wins() -> None:
    pol = _policy()
    a = pol.for_principal(Principal("key_9", "a"))
    ops = pol.for_principal(Principal("key_8", "a", app="ops"))
    k1 = pol.for_principal(Principal("key_1", "b"))
    assert a.visible("fs__read") and not a.visible("fs__secret_x")
    assert not a.visible("db__query") and ops.visible("db__query")
    assert k1.visible("db__drop") and not k1.visible("fs__read")
    assert not pol.for_principal(Principal("key_2", "b")).visible("fs__read")
    assert a.server_visible("fs") and not a.server_visible("db") and ops.server_visible("db")


def test_call_checks_in_order() -> None:
    pol = _policy()
    a = pol.for_principal(Principal("key_9", "a"))
    hidden = pol.check_call(a, "db", "query", {}, False)
    assert hidden is not None and hidden.hidden and hidden.reason == "Unknown tool: db__query"
    bad = pol.check_call(a, "fs", "read", {"path": "/etc"}, False)
    assert bad is not None and bad.decision == "deny_argument"
    assert pol.check_call(a, "fs", "read", {"path": "/srv/x"}, False) is None
    confirm = pol.check_call(a, "fs", "rm", {}, False)
    assert confirm is not None and confirm.decision == "confirm_required"
    assert pol.check_call(a, "fs", "rm", {}, True) is None
    deny = _policy(destructive="deny")
    refused = deny.check_call(deny.for_principal(Principal("k", "a")), "fs", "rm", {}, True)
    assert refused is not None and refused.decision == "deny_destructive"
    allow = _policy(destructive="allow")
    assert allow.check_call(allow.for_principal(Principal("k", "a")), "fs", "rm", {}, False) \
        is None


def test_argument_rules() -> None:
    rule = ArgumentRule(GlobSet(["fs__read"]), "path", re.compile("/srv/docs/"), required=True)
    assert rule.check({"path": "/srv/docs/a"}) is None
    assert rule.check({}) == "argument 'path' is required"
    assert rule.check({"path": 3}) == "argument 'path' must be a string"
    assert "must match" in (rule.check({"path": "/etc/x"}) or "")
    assert "'..'" in (rule.check({"path": "/srv/docs/../x"}) or "")
    schema = {"type": "object", "required": ["n"],
              "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5},
                             "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}}
    assert check_schema({"n": 3, "tags": ["a"]}, schema, "x") is None
    assert check_schema({"n": 9}, schema, "x") == "x.n must be at most 5"
    assert check_schema({"n": True}, schema, "x") == "x.n must be of type integer"
    assert check_schema({}, schema, "x") == "x.n is required"
    assert check_schema({"n": 1, "tags": ["c"]}, schema, "x") == \
        "x.tags[0] must be one of ['a', 'b']"
    assert schema_problem({"type": "string", "format": "uri"}) is not None
    assert schema_problem({"properties": {"a": {"type": "nope"}}}) is not None
    assert schema_problem(schema) is None


def test_rate_log_and_in_flight() -> None:
    log = RateLog()
    rule = RateRule(2, 10.0)
    assert log.take(("t", "k"), rule, 0.0) is None
    assert log.take(("t", "k"), rule, 1.0) is None
    assert log.take(("t", "k"), rule, 2.0) == pytest.approx(8.0)
    assert log.take(("t", "other"), rule, 2.0) is None
    assert log.take(("t", "k"), rule, 10.5) is None  # the first call left the window
    log.forget_idle(100.0, 10.0)
    assert not log._times
    fl = InFlight()
    assert fl.enter("t", 1) and not fl.enter("t", 1)
    fl.leave("t")
    assert fl.count("t") == 0 and fl.enter("t", 1)


def test_names() -> None:
    assert split(qualify("fs", "read_file")) == ("fs", "read_file")
    assert split("fs__a__b") == ("fs", "a__b") and split("plain") is None
    assert split("__x") is None
    uri = qualify_uri("fs", "file:///a")
    assert uri == "mcp+fs:file:///a" and split_uri(uri) == ("fs", "file:///a")
    assert split_uri("file:///a") is None


@pytest.mark.parametrize(("raw", "code"), [
    (b"{", jsonrpc.PARSE_ERROR), (b"[]", jsonrpc.INVALID_REQUEST),
    (b"3", jsonrpc.INVALID_REQUEST), (b'{"jsonrpc":"2.0","id":1}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":5}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', jsonrpc.INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', jsonrpc.INVALID_PARAMS),
])
def test_bad_messages(raw: bytes, code: int) -> None:
    with pytest.raises(jsonrpc.RpcError) as exc:
        jsonrpc.parse(raw)
    assert exc.value.code == code and exc.value.status == 400


def test_messages() -> None:
    m = jsonrpc.parse(b'{"jsonrpc":"2.0","id":"a","method":"tools/list"}')
    assert isinstance(m, jsonrpc.Message) and m.id == "a" and not m.notification
    n = jsonrpc.parse(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(n, jsonrpc.Message) and n.notification
    assert isinstance(jsonrpc.parse(b'{"jsonrpc":"2.0","id":1,"result":{}}'), dict)


def test_truncation_is_exact_to_the_token() -> None:
    tok = TokenizerRegistry().get("tiktoken:cl100k_base")
    text = " ".join(f"w{i}" for i in range(2000))
    result = {"content": [{"type": "text", "text": text}, {"type": "image", "data": "x"},
                          {"type": "text", "text": "tail block"}],
              "structuredContent": {"result": text}, "isError": False}
    cut = truncate(result, 100, tok, tok.count)
    assert cut.truncated and cut.tokens_before > 1000 and cut.tokens_after <= 100
    blocks = cut.result["content"]
    assert blocks[0]["text"].startswith("w0 w1") and "removed by tokenplane" in blocks[0]["text"]
    assert blocks[1]["type"] == "image" and "structuredContent" not in cut.result
    assert cut.result["isError"] is False
    small = truncate({"content": [{"type": "text", "text": "hi"}]}, 100, tok, tok.count)
    assert not small.truncated and small.tokens_after == small.tokens_before
    assert result_texts({"structuredContent": {"a": 1}}) == ['{"a":1}']
    assert structured_json({"content": [], "structuredContent": {"r": "é/x"}}) == '{"r":"é/x"}'
    assert structured_json({"content": []}) is None


def test_tool_costs_link_each_step_to_the_latest_call_before_it() -> None:
    from tokenplane.mcp.links import tool_costs
    from tokenplane.sessions.tool_links import forwarded_digests, message_digests

    d = forwarded_digests(["result A"])
    assert message_digests([{"role": "tool", "content": " result A\n"}]) == tuple(d)
    # a result with structuredContent is found again as the JSON Claude Code sends
    both = forwarded_digests(["result A"], '{"result":"result A"}')
    assert both[0] == d[0] and len(both) == 2
    assert message_digests([{"role": "tool", "content": '{"result":"result A"}'}]) == (
        both[1],)
    # and under its text without the <system-reminder> sections Claude Code appends
    reminded = ("result A\n\n<system-reminder>\n9 tokens left\n</system-reminder>\n"
                "<system-reminder>x</system-reminder>\n")
    assert message_digests([{"role": "tool", "content": reminded}])[1:] == tuple(d)
    inner = "a <system-reminder>x</system-reminder> b"  # only the sections at its end
    assert len(message_digests([{"role": "tool", "content": inner}])) == 1

    def call(rid: str, ts: float, tokens: int, digests: list[str]) -> dict[str, Any]:
        return {"kind": "mcp", "method": "tools/call", "decision": "allow", "tenant": "t",
                "server": "fs", "name": "read", "request_id": rid, "ts": ts,
                "tokens": {"result": tokens}, "result_digests": digests}

    records = [
        call("c1", 1.0, 10, d), call("c2", 5.0, 10, d),  # the same result twice
        call("c3", 2.0, 99, ["other"]),
        {"kind": "mcp", "method": "tools/call", "decision": "deny_argument", "tenant": "t",
         "server": "fs", "name": "read", "ts": 2.5, "result_digests": d},
        {"kind": "request", "tenant": "t", "request_id": "s2", "session": {
            "id": "S", "step": 2, "tool_results": d}},
        {"kind": "request", "tenant": "t", "request_id": "s3", "session": {
            "id": "S", "step": 3, "tool_results": d}},
        {"kind": "request", "tenant": "u", "request_id": "s3", "session": {
            "id": "S", "step": 3, "tool_results": ["other"]}},  # another tenant's
    ]
    steps = [{"request_id": "s1", "session_step": 1, "arrival_ts": 0.5, "input_tokens": 50},
             {"request_id": "s2", "session_step": 2, "arrival_ts": 3.0, "input_tokens": 70},
             {"request_id": "s2", "session_step": 2, "arrival_ts": 3.1, "input_tokens": 70},
             {"request_id": "s3", "session_step": 3, "arrival_ts": 6.0, "input_tokens": 80}]
    out = tool_costs("S", "t", steps, records)
    assert out["input_tokens"] == 200  # the retried attempt counted once
    assert [(c["call_request_id"], c["first_step"], c["steps_carrying"])
            for c in out["calls"]] == [("c1", 2, 1), ("c2", 3, 1)]
    assert out["tools"] == [{"tool": "fs__read", "calls": 2, "result_tokens": 20,
                             "carried_tokens": 20, "share_of_input": 0.1}]
