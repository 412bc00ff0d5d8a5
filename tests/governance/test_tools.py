from __future__ import annotations

import pytest

from tokenplane.governance.tools import ToolMode, ToolNotAllowed, ToolPolicy


def _tool(name: str) -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "parameters": {}}}


BODY = {
    "model": "m",
    "tools": [_tool("search"), _tool("delete_files")],
    "tool_choice": {"type": "function", "function": {"name": "delete_files"}},
}


def test_plain_set_and_string_mode() -> None:
    policy = ToolPolicy(allowed={"search"}, mode="strip")  # type: ignore[arg-type]
    assert policy.mode is ToolMode.STRIP
    assert policy.check_request(BODY)["tools"] == [_tool("search")]
    with pytest.raises(ValueError):
        ToolPolicy(mode="shred")  # type: ignore[arg-type]


def test_everything_allowed_by_default() -> None:
    assert ToolPolicy().check_request(BODY) == BODY


def test_reject_names_the_tool() -> None:
    with pytest.raises(ToolNotAllowed) as info:
        ToolPolicy.of({"search"}).check_request(BODY)
    assert info.value.status == 400 and info.value.param == "tools"
    assert "delete_files" in info.value.message and "search" not in info.value.names


def test_strip_removes_tool_and_fixes_tool_choice() -> None:
    out = ToolPolicy.of({"search"}, ToolMode.STRIP).check_request(BODY)
    assert out["tools"] == [_tool("search")]
    assert out["tool_choice"] == "auto"
    assert BODY["tools"] == [_tool("search"), _tool("delete_files")]  # input untouched


def test_strip_all_tools_drops_tool_fields() -> None:
    out = ToolPolicy.of(set(), "strip").check_request({**BODY, "parallel_tool_calls": True})
    assert "tools" not in out and "tool_choice" not in out and "parallel_tool_calls" not in out


def test_response_calling_disallowed_tool_is_blocked() -> None:
    policy = ToolPolicy.of({"search"})
    ok = {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "search"}}]}
    policy.check_response(ok)
    bad = {"role": "assistant", "tool_calls": [{"id": "2", "function": {"name": "rm"}}]}
    with pytest.raises(ToolNotAllowed) as info:
        policy.check_response(bad)
    assert info.value.names == ["rm"]
    assert policy.denied_calls(None) == []
