"""The response cache in a running gateway: exact and semantic hits, tenant isolation,
misses on a changed system prompt or tool list, stream replay through the official
openai client, billing and savings in the ledger, metrics, admin invalidation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.cache.harness import MODEL, SYSTEM, cache_config, chat, post
from tests.gateway.harness import GatewayThread

TOOLS = [{"type": "function", "function": {
    "name": "get_invoice", "description": "Fetch an invoice",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    g = GatewayThread(cache_config(), Path(tmp_path_factory.mktemp("cache"))).start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def keys(gw: GatewayThread) -> dict[str, str]:
    return {
        "a": gw.create_key("alpha", app="support"),
        "a2": gw.create_key("alpha", app="billing"),
        "b": gw.create_key("beta", app="support"),
    }


def test_exact_hit_replays_the_answer(gw: GatewayThread, keys: dict[str, str]) -> None:
    body = chat("What regions does Acme Cloud run in?")
    first = post(gw.base_url, keys["a"], body)
    assert first.status_code == 200 and "x-tokenplane-cache" not in first.headers
    second = post(gw.base_url, keys["a"], body)
    assert second.status_code == 200
    assert second.headers["x-tokenplane-cache"] == "exact"
    assert second.headers["x-tokenplane-cache-source"] == first.headers["x-request-id"]
    assert second.content == first.content


def test_nondeterministic_requests_are_not_cached(gw: GatewayThread, keys: dict[str, str]
                                                  ) -> None:
    # app "billing" has the exact cache only (the semantic one is opted in per app)
    body = chat("Tell me a joke about clouds.", temperature=0.8)
    post(gw.base_url, keys["a2"], body)
    again = post(gw.base_url, keys["a2"], body)
    assert "x-tokenplane-cache" not in again.headers
    seeded = chat("Tell me a joke about clouds.", temperature=0.8, seed=7)
    post(gw.base_url, keys["a2"], seeded)
    assert post(gw.base_url, keys["a2"], seeded).headers["x-tokenplane-cache"] == "exact"


def test_semantic_hit_on_a_paraphrase(gw: GatewayThread, keys: dict[str, str]) -> None:
    post(gw.base_url, keys["a"], chat("How do I reset my password?"))
    near = post(gw.base_url, keys["a"], chat("How can I reset my password?"))
    assert near.headers.get("x-tokenplane-cache") == "semantic"
    zh = chat("北京今天天气怎么样？")
    post(gw.base_url, keys["a"], zh)
    assert post(gw.base_url, keys["a"], chat("今天北京的天气如何？")).headers.get(
        "x-tokenplane-cache") == "semantic"
    other = post(gw.base_url, keys["a"], chat("How do I delete my account?"))
    assert "x-tokenplane-cache" not in other.headers


def test_no_hit_across_tenants_or_apps(gw: GatewayThread, keys: dict[str, str]) -> None:
    asked = chat("Which plan includes priority support?")
    near = chat("Which plan comes with priority support?")
    a_ids = {post(gw.base_url, keys["a"], asked).headers["x-request-id"]}
    hit = post(gw.base_url, keys["a"], asked)
    assert hit.headers["x-tokenplane-cache"] == "exact"
    assert post(gw.base_url, keys["a"], near).headers.get("x-tokenplane-cache") == "semantic"
    # tenant beta (semantic on for its app too) and alpha's other app ask exactly and
    # near-exactly what alpha/support asked: their first asks are misses
    for other, body in (("b", asked), ("a2", asked), ("a2", near)):
        resp = post(gw.base_url, keys[other], body)
        assert resp.status_code == 200
        assert "x-tokenplane-cache" not in resp.headers, (other, body)
    b_near = post(gw.base_url, keys["b"], near)  # may hit beta's own entry, never alpha's
    assert b_near.headers.get("x-tokenplane-cache-source") not in a_ids
    post(gw.base_url, keys["a"], chat("Can I pay by invoice?"))
    first = post(gw.base_url, keys["b"], chat("Can I pay with an invoice?"))
    assert "x-tokenplane-cache" not in first.headers  # near-exact, another tenant


def test_changed_system_prompt_or_tools_miss(gw: GatewayThread, keys: dict[str, str]) -> None:
    base = chat("Show me invoice 42.", tools=TOOLS)
    post(gw.base_url, keys["a"], base)
    assert post(gw.base_url, keys["a"], base).headers["x-tokenplane-cache"] == "exact"
    changed_system = chat("Show me invoice 42.", tools=TOOLS,
                          system={"role": "system", "content": "You are a billing bot."})
    fewer_tools = chat("Show me invoice 42.", tools=[])
    other_tool = chat("Show me invoice 42.", tools=[{**TOOLS[0], "function": {
        **TOOLS[0]["function"], "name": "get_receipt"}}])
    for body in (changed_system, fewer_tools, other_tool):
        assert "x-tokenplane-cache" not in post(gw.base_url, keys["a"], body).headers


def _sse(gw: GatewayThread, key: str, body: dict[str, Any]) -> httpx.Response:
    with httpx.Client(timeout=30) as c:
        return c.post(f"{gw.base_url}/chat/completions", json=body,
                      headers={"authorization": f"Bearer {key}"})


def test_stream_replay_is_the_live_stream(gw: GatewayThread, keys: dict[str, str]) -> None:
    body = chat("List three Acme Cloud storage tiers.", stream=True,
                stream_options={"include_usage": True})
    live = _sse(gw, keys["a"], body)
    replay = _sse(gw, keys["a"], body)
    assert replay.headers["x-tokenplane-cache"] == "exact"
    assert replay.headers["content-type"].startswith("text/event-stream")
    assert replay.content == live.content  # byte for byte, usage chunk and [DONE] included
    assert replay.content.endswith(b"data: [DONE]\n\n")
    assert b'"usage":{' in replay.content

    client = openai.OpenAI(base_url=gw.base_url, api_key=keys["a"], max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=body["messages"], max_tokens=12, temperature=0,
        stream=True, stream_options={"include_usage": True})
    assert raw.headers["x-tokenplane-cache"] == "exact"
    chunks = list(raw.parse())
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and usage[0].completion_tokens > 0
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text
    client.close()


def test_admin_invalidation(gw: GatewayThread, keys: dict[str, str]) -> None:
    admin = gw.create_key("alpha", admin=True)
    body = chat("How long are backups kept?")
    post(gw.base_url, keys["a"], body)
    post(gw.base_url, keys["b"], body)
    assert post(gw.base_url, keys["a"], body).headers["x-tokenplane-cache"] == "exact"
    root = gw.base_url.removesuffix("/v1")
    denied = httpx.delete(f"{root}/admin/v1/cache", params={"tenant": "alpha"},
                          headers={"authorization": f"Bearer {keys['b']}"})
    assert denied.status_code == 403 and denied.json()["error"]["param"] == "tenant"
    missing = httpx.delete(f"{root}/admin/v1/cache",
                           headers={"authorization": f"Bearer {admin}"})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "tenant"
    wrong_app = httpx.delete(f"{root}/admin/v1/cache",
                             params={"tenant": "alpha", "app": "billing"},
                             headers={"authorization": f"Bearer {admin}"})
    assert wrong_app.status_code == 200
    assert post(gw.base_url, keys["a"], body).headers["x-tokenplane-cache"] == "exact"
    done = httpx.delete(f"{root}/admin/v1/cache", params={"tenant": "alpha", "app": "support"},
                        headers={"authorization": f"Bearer {admin}"})
    assert done.status_code == 200 and done.json()["removed"] >= 1
    assert "x-tokenplane-cache" not in post(gw.base_url, keys["a"], body).headers
    # beta's entry is untouched
    assert post(gw.base_url, keys["b"], body).headers["x-tokenplane-cache"] == "exact"


def test_a_canary_version_has_its_own_entries(tmp_path: Path) -> None:
    """With a split between model versions, an answer of v1 is never served to a request
    routed to v2 (the scope holds the version routing chose)."""
    cfg = cache_config()
    model = cfg["models"][0]
    model["backends"] = [
        {"id": "stable", "type": "sim", "profile": "instant", "model_version": "v1"},
        {"id": "canary", "type": "sim", "profile": "instant", "model_version": "v2"}]
    cfg["routing"] = {"splits": {MODEL: {"weights": {"v1": 50, "v2": 50},
                                         "header": "x-canary",
                                         "header_versions": {"always": "v2", "never": "v1"}}}}
    g = GatewayThread(cfg, tmp_path).start()
    try:
        key = g.create_key("alpha", app="billing")
        body = chat("Which version answers this?")

        def ask(pin: str) -> httpx.Response:
            return httpx.post(f"{g.base_url}/chat/completions", json=body, timeout=30,
                              headers={"authorization": f"Bearer {key}", "x-canary": pin})

        assert "x-tokenplane-cache" not in ask("never").headers
        assert ask("never").headers["x-tokenplane-cache"] == "exact"
        assert "x-tokenplane-cache" not in ask("always").headers  # v2: a scope of its own
        assert ask("always").headers["x-tokenplane-cache"] == "exact"
    finally:
        g.stop()


def test_completions_and_semantic_streams(gw: GatewayThread, keys: dict[str, str]) -> None:
    client = openai.OpenAI(base_url=gw.base_url, api_key=keys["a"], max_retries=0)
    first = client.completions.with_raw_response.create(
        model=MODEL, prompt="The three primary colours are", max_tokens=6, temperature=0)
    again = client.completions.with_raw_response.create(
        model=MODEL, prompt="The three primary colours are", max_tokens=6, temperature=0)
    assert "x-tokenplane-cache" not in first.headers
    assert again.headers["x-tokenplane-cache"] == "exact"
    assert again.parse().choices[0].text == first.parse().choices[0].text
    msgs: list[Any] = [SYSTEM, {"role": "user", "content": "How do I rotate my API key?"}]
    near: list[Any] = [SYSTEM, {"role": "user", "content": "How can I rotate my API key?"}]
    live = list(client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8,
                                               temperature=0, stream=True))
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=near, max_tokens=8, temperature=0, stream=True)
    assert raw.headers["x-tokenplane-cache"] == "semantic"
    replay = list(raw.parse())
    assert all(c.usage is None for c in replay)  # not asked: the usage chunk is held back
    text = "".join(c.choices[0].delta.content or "" for c in replay if c.choices)
    assert text == "".join(c.choices[0].delta.content or "" for c in live if c.choices)
    client.close()


def test_messages_are_cached_by_their_canonical_request(
        gw: GatewayThread, keys: dict[str, str]) -> None:
    """A Messages request is cached like a chat one (keyed by its canonical request, per
    tenant and app); the hit is rendered in Messages' format, stream and not."""
    body = {"model": MODEL, "max_tokens": 12, "temperature": 0, "system": SYSTEM["content"],
            "messages": [{"role": "user", "content": "Which regions, in Messages?"}]}

    def send(key: str, stream: bool = False) -> httpx.Response:
        return httpx.post(gw.base_url.removesuffix("/v1") + "/v1/messages",
                          json={**body, "stream": stream}, headers={"x-api-key": key},
                          timeout=30)

    first = send(keys["a"])
    assert first.status_code == 200 and "x-tokenplane-cache" not in first.headers
    second = send(keys["a"])
    assert second.headers["x-tokenplane-cache"] == "exact"
    assert second.json()["content"] == first.json()["content"]
    assert second.json()["type"] == "message"
    assert "x-tokenplane-cache" not in send(keys["b"]).headers  # another tenant: no hit
    send(keys["a"], stream=True)
    streamed = send(keys["a"], stream=True)
    assert streamed.headers["x-tokenplane-cache"] == "exact"
    assert b"event: message_stop" in streamed.content
