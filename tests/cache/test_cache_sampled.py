"""The semantic cache and sampled requests, and hits in session budgets (issue 33,
finding 7): a request without ``temperature: 0`` or a ``seed`` is neither stored nor
served by the semantic cache, as by the exact one, unless ``nondeterministic`` opts it
in; and a hit counts every token it saved against its agent session's budget, even
when billing counts none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.cache.harness import cache_config, chat, post
from tests.gateway.harness import GatewayThread
from tokenplane.cache.policy import CachePolicy
from tokenplane.config.cache_schema import CacheConfig


def _sampled(user: str, **extra: Any) -> dict[str, Any]:
    body = chat(user, **extra)
    del body["temperature"]
    return body


def test_policy_applies_the_determinism_rule_to_the_semantic_cache() -> None:
    on = CacheConfig.model_validate({"semantic": {"enabled": True}})
    pol = CachePolicy(on)
    assert pol.decide("t", "a", "m", {"temperature": 0}).semantic
    assert pol.decide("t", "a", "m", {"seed": 7}).semantic
    assert not pol.decide("t", "a", "m", {}).semantic
    assert not pol.decide("t", "a", "m", {"temperature": 0.8}).semantic
    assert not pol.decide("t", "a", "m", {"temperature": 0, "n": 2}).semantic
    opted = CachePolicy(CacheConfig.model_validate(
        {"semantic": {"enabled": True, "nondeterministic": True}}))
    assert opted.decide("t", "a", "m", {}).semantic
    assert not opted.decide("t", "a", "m", {}).exact  # the exact cache's own opt-in
    ruled = CachePolicy(CacheConfig.model_validate(
        {"semantic": {"enabled": True}, "rules": [{"app": "a", "nondeterministic": True}]}))
    assert ruled.decide("t", "a", "m", {}).semantic and ruled.decide("t", "a", "m", {}).exact
    assert not ruled.decide("t", "b", "m", {}).semantic


def test_sampled_requests_are_not_served_semantically(tmp_path: Path) -> None:
    g = GatewayThread(cache_config(), tmp_path).start()
    try:
        key = g.create_key("alpha", app="support")
        for _ in range(3):
            r = post(g.base_url, key, _sampled("How do I reset my password?"))
            assert r.status_code == 200, r.text
            assert "x-tokenplane-cache" not in r.headers
        # the same question, deterministic: stored, then served
        first = post(g.base_url, key, chat("How do I reset my password?"))
        assert "x-tokenplane-cache" not in first.headers
        again = post(g.base_url, key, chat("How can I reset my password?"))
        assert again.headers.get("x-tokenplane-cache") in ("exact", "semantic"), again.headers
    finally:
        g.stop()


def test_hits_count_toward_the_session_budget(tmp_path: Path) -> None:
    cap = 400
    cfg = cache_config(sessions={"budget": {"max_tokens": cap}})
    g = GatewayThread(cfg, tmp_path).start()
    try:
        key = g.create_key("alpha", app="support")
        body = chat("What regions does Acme Cloud run in?")
        headers = {"x-tokenplane-session": "agent-1"}

        def step() -> httpx.Response:
            return httpx.post(f"{g.base_url}/chat/completions", json=body, timeout=30,
                              headers={"authorization": f"Bearer {key}", **headers})

        first = step()
        assert first.status_code == 200 and "x-tokenplane-cache" not in first.headers
        per = first.json()["usage"]["total_tokens"]
        hits, refused = 0, None
        for _ in range(3 * cap // per):
            r = step()
            if r.status_code != 200:
                refused = r
                break
            assert r.headers.get("x-tokenplane-cache") == "exact"
            hits += 1
        assert refused is not None, "hits never counted toward the session's budget"
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "session_budget_exceeded"
        # every step, hits included, counted: refused once the cap was spent
        assert (1 + hits) * per <= cap + per
    finally:
        g.stop()
