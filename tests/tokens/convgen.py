"""Deterministic random chat conversations (messages + tools) for template tests."""

from __future__ import annotations

import json
import random
from typing import Any

from .textgen import GENERATORS

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "天气 / weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_docs",
            "description": "Search the knowledge base.",
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": "string"}, "k": {"type": "integer"}},
            },
        },
    },
]


def text(rng: random.Random) -> str:
    kind = rng.choice(list(GENERATORS))
    size = rng.randint(1, 6) if kind == "code" else rng.randint(1, 40)
    value = GENERATORS[kind](rng, size)
    if rng.random() < 0.1:
        value = rng.choice(("\n", "  ", "\n\n")) + value + rng.choice(("", "\n", " "))
    return value


def content(rng: random.Random, parts_ok: bool) -> str | list[dict[str, Any]]:
    if not parts_ok or rng.random() < 0.6:
        return text(rng)
    parts: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 3)):
        part: dict[str, Any] = {"type": "text", "text": text(rng)}
        if rng.random() < 0.4:
            part["tokenplane_source"] = "context"
        parts.append(part)
    return parts


def tool_call(rng: random.Random, i: int) -> dict[str, Any]:
    args = (
        {"city": rng.choice(("北京", "Paris", "São Paulo"))}
        if rng.random() < 0.5
        else {"q": text(rng)[:40], "k": rng.randint(1, 9)}
    )
    name = "get_weather" if "city" in args else "search_docs"
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }


def conversation(
    rng: random.Random, parts_ok: bool = True, names_ok: bool = True
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    msgs: list[dict[str, Any]] = []
    if rng.random() < 0.7:
        msgs.append({"role": "system", "content": text(rng)})
    for turn in range(rng.randint(0, 4)):
        msgs.append({"role": "user", "content": content(rng, parts_ok)})
        if rng.random() < 0.3:
            calls = [tool_call(rng, turn * 10 + k) for k in range(rng.randint(1, 2))]
            msg: dict[str, Any] = {
                "role": "assistant",
                "content": text(rng) if rng.random() < 0.3 else None,
                "tool_calls": calls,
            }
            msgs.append(msg)
            for c in calls:
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": text(rng)})
        if rng.random() < 0.8:
            msgs.append({"role": "assistant", "content": text(rng)})
        if rng.random() < 0.1:
            msgs.append({"role": "system", "content": text(rng)})
    user: dict[str, Any] = {"role": "user", "content": content(rng, parts_ok)}
    if names_ok and rng.random() < 0.2:
        user["name"] = rng.choice(("alice", "bob_2", "rag_snippets"))
    msgs.append(user)
    tools = TOOLS[: rng.randint(1, 2)] if rng.random() < 0.4 else None
    return msgs, tools
