"""A gateway with simulated replicas and a response cache, for the cache tests."""

from __future__ import annotations

from typing import Any

import httpx

from tests.gateway.harness import sim_config

MODEL = "sim-llama3-8b"
SYSTEM = {"role": "system", "content": "You are a support assistant for Acme Cloud."}


def cache_config(cache: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    cfg = sim_config(replicas=1)
    cfg["tenants"] = [{"name": "alpha"}, {"name": "beta"}]
    cfg["observe"] = {"metrics": {"listen": None}}
    cfg["cache"] = cache if cache is not None else {
        "billing": {"mode": "free"}, "rules": [{"app": "support", "semantic": True}]}
    cfg.update(top)
    return cfg


def chat(user: str, system: dict[str, Any] | None = SYSTEM, **extra: Any) -> dict[str, Any]:
    msgs = ([system] if system is not None else []) + [{"role": "user", "content": user}]
    body: dict[str, Any] = {"model": MODEL, "messages": msgs, "max_tokens": 12,
                            "temperature": 0}
    body.update(extra)
    return body


def post(base_url: str, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base_url}/chat/completions", json=body,
                      headers={"authorization": f"Bearer {key}"}, timeout=30)
