"""Client mistakes that used to end in a 500 (issue 13, item 11): each is a 400 in
OpenAI's envelope naming the field, and the gateway still serves afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from tests.gateway.harness import GatewayThread
from tokenplane.cli.main import build_cli

MODEL = "sim-llama3-8b"
OK_MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def admin_key(gateway: GatewayThread) -> str:
    return gateway.create_key("default", admin=True)


def _root(gw: GatewayThread) -> str:
    return gw.base_url.removesuffix("/v1")


def _bad(resp: httpx.Response, param: str) -> dict[str, Any]:
    assert resp.status_code == 400, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param, err
    assert "Traceback" not in resp.text
    return dict(err)


def _still_serves(gw: GatewayThread, key: str) -> None:
    resp = httpx.post(gw.base_url + "/chat/completions", timeout=30,
                      json={"model": MODEL, "messages": OK_MSG, "max_tokens": 3},
                      headers={"authorization": f"Bearer {key}"})
    assert resp.status_code == 200, resp.text


def _post(gw: GatewayThread, key: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(gw.base_url + path, json=body, timeout=30,
                      headers={"authorization": f"Bearer {key}"})


# the param names the exact field at fault (issue 13, item 14)
TOOL_CALLS = [("a string", "x", ""), ("a list of non-objects", [1, "a"], "[0]"),
              ("function not an object", [{"type": "function", "function": "f"}],
               "[0].function")]


@pytest.mark.parametrize(("calls", "where"), [c[1:] for c in TOOL_CALLS],
                         ids=[c[0] for c in TOOL_CALLS])
def test_chat_tool_calls_mistyped(gateway: GatewayThread, api_key: str, calls: Any,
                                  where: str) -> None:
    msgs = [*OK_MSG, {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "user", "content": "and?"}]
    resp = _post(gateway, api_key, "/chat/completions", {"model": MODEL, "messages": msgs})
    assert _bad(resp, "messages[1].tool_calls" + where)["code"] == "invalid_type"
    _still_serves(gateway, api_key)


PROMPTS = [("beyond any vocabulary", [1000000000000]), ("negative", [5, -1]),
           ("beyond the model's vocabulary", [10**9])]


@pytest.mark.parametrize("prompt", [p[1] for p in PROMPTS], ids=[p[0] for p in PROMPTS])
def test_completion_token_ids_out_of_range(gateway: GatewayThread, api_key: str,
                                           prompt: list[int]) -> None:
    resp = _post(gateway, api_key, "/completions",
                 {"model": MODEL, "prompt": prompt, "max_tokens": 3})
    assert _bad(resp, "prompt")["code"] == "invalid_token_id"
    _still_serves(gateway, api_key)


def test_completion_token_id_lists_of_lists(gateway: GatewayThread, api_key: str) -> None:
    resp = _post(gateway, api_key, "/completions",
                 {"model": MODEL, "prompt": [[1, 2], [1000000000000]], "max_tokens": 3})
    # a batch of two prompts: the second holds an id outside the vocabulary
    assert _bad(resp, "prompt[1]")["code"] == "invalid_token_id"
    _still_serves(gateway, api_key)


EMBED_INPUTS = [("flat", [1000000000000]), ("nested", [[1, 2], [1000000000000]]),
                ("negative", [[1], [-1]])]


@pytest.mark.parametrize("inp", [p[1] for p in EMBED_INPUTS], ids=[p[0] for p in EMBED_INPUTS])
def test_embedding_token_ids_out_of_range(gateway: GatewayThread, api_key: str,
                                          inp: list[Any]) -> None:
    resp = _post(gateway, api_key, "/embeddings", {"model": MODEL, "input": inp})
    assert _bad(resp, "input")["code"] == "invalid_token_id"
    _still_serves(gateway, api_key)


def test_in_vocabulary_token_ids_still_work(gateway: GatewayThread, api_key: str) -> None:
    resp = _post(gateway, api_key, "/completions",
                 {"model": MODEL, "prompt": [1, 2, 3], "max_tokens": 3})
    assert resp.status_code == 200, resp.text
    resp = _post(gateway, api_key, "/embeddings", {"model": MODEL, "input": [[1, 2], [3]]})
    assert resp.status_code == 200, resp.text


BOUNDS = [("since", "1e400"), ("until", "1e400"), ("since", "-1e400"), ("since", "nan"),
          ("until", "inf"), ("since", "abc"), ("until", "-5")]
ROUTES = ["/admin/v1/usage", "/admin/v1/usage/sources", "/admin/v1/usage/top",
          "/admin/v1/usage/clients", "/admin/v1/audit"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("name", "value"), BOUNDS, ids=[f"{n}={v}" for n, v in BOUNDS])
def test_time_bounds_out_of_range(gateway: GatewayThread, api_key: str, admin_key: str,
                                  route: str, name: str, value: str) -> None:
    resp = httpx.get(_root(gateway) + route, params={name: value}, timeout=30,
                     headers={"authorization": f"Bearer {admin_key}"})
    assert "bad time" in _bad(resp, name)["message"]
    ok = httpx.get(_root(gateway) + route, params={name: "7d"}, timeout=30,
                   headers={"authorization": f"Bearer {admin_key}"})
    assert ok.status_code == 200, ok.text
    _still_serves(gateway, api_key)


@pytest.mark.parametrize("budget", ["1e30", 1e30, "inf", "nan", "-1", "1e5000", "ten"])
def test_budget_out_of_range(gateway: GatewayThread, api_key: str, admin_key: str,
                             budget: Any) -> None:
    url, auth = _root(gateway) + "/admin/v1/limits", {"authorization": f"Bearer {admin_key}"}
    resp = httpx.put(url, timeout=30, headers=auth,
                     json={"target": {"tenant": "default"},
                           "limits": {"budget": budget}})
    assert _bad(resp, "budget")["code"] == "invalid_budget"
    ok = httpx.put(url, timeout=30, headers=auth,
                   json={"target": {"tenant": "default"},
                         "limits": {"budget": "12.50"}})
    assert ok.status_code == 200, ok.text
    assert ok.json()["limits"]["budget_micros"] == 12_500_000
    _still_serves(gateway, api_key)


@pytest.mark.parametrize("budget", ["1e30", "inf", "nan", "-1"])
def test_cli_budget_out_of_range(tmp_path: Path, budget: str) -> None:
    result = CliRunner().invoke(build_cli(), ["limits", "set", "--tenant", "t", "--budget",
                                              budget, "--home", str(tmp_path)],
                                env={"TOKENPLANE_DATABASE_URL": ""})
    assert result.exit_code == 2, result.output
    assert "budget" in result.output
    assert "Traceback" not in result.output
