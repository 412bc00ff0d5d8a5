"""A seeded corpus of varied Anthropic Messages requests, and the check that a gateway
counts each one's prompt exactly as its (simulated) engine does.

Each request: a system prompt (absent, a string, or text blocks, some with
``cache_control``), 0-20 tools with realistic JSON schemas, a multi-turn history
(assistant text, thinking blocks, ``tool_use`` blocks answered by ``tool_result``
blocks, some with images or ``is_error``), base64 PNG images and text-source documents
in user turns, and a last user turn. ``bench/bench_messages_counts.py`` runs 1,000 of
them; ``test_messages_counts.py`` 50.

:func:`check_counts` sends each to ``POST /v1/messages/count_tokens`` and as a
``max_tokens: 1`` create, and compares the gateway's counts (count_tokens'
``input_tokens``; the ledger's ``estimated_input_tokens``, the gateway's pre-call count)
with the engine's reported prompt (the answer's ``input_tokens`` + cache reads + cache
writes; and the ledger's ``input_tokens``).
"""

from __future__ import annotations

import asyncio
import base64
import random
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.gateway.harness import GatewayThread, sim_config

ALIAS = "sim-llama3-8b"

_VOCAB = (
    "the gateway counts every token a tenant spends on each model request and finance "
    "reconciles the ledger at month end refund order invoice shipping warranty policy "
    "deploy rollback kubernetes pod replica latency throughput p99 cache prefix schema "
    "客户 订单 退款 物流 发票 账户 密码 政策 回答 简洁 Größe Straße naïve café résumé "
    "🙂 🚀 ✅ — … “quoted” «guillemets» x=1; y = f(x) -> None {key: value} [1, 2, 3]"
)
_WORDS = _VOCAB.split()
_CODE = [
    "def add(a: int, b: int) -> int:\n    return a + b\n",
    "for (let i = 0; i < n; i++) {\n  total += xs[i];\n}\n",
    "SELECT tenant, SUM(input_tokens) FROM usage_events GROUP BY tenant;\n",
    "```diff\n- old_line()\n+ new_line(arg=1)\n```\n",
    '{"id": 42, "tags": ["a", "b"], "nested": {"ok": true, "n": null}}\n',
    "    \t\tindented\twith\ttabs   and  runs   of   spaces\n\n\n",
]
_PROP_TYPES = ["string", "integer", "number", "boolean"]


def _text(rng: random.Random, lo: int, hi: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(lo, hi))]
    if rng.random() < 0.3:
        words.insert(rng.randint(0, len(words)), "\n" + rng.choice(_CODE))
    return " ".join(words)


def png(rng: random.Random) -> str:
    """A small valid PNG (random size and pixels), base64."""
    w, h = rng.randint(1, 24), rng.randint(1, 24)
    raw = b"".join(b"\x00" + rng.randbytes(3 * w) for _ in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return base64.b64encode(data).decode()


def _schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for j in range(rng.randint(1, 6)):
        name = f"{rng.choice(['path', 'query', 'limit', 'mode', 'id', 'items', 'flag'])}_{j}"
        r = rng.random()
        if r < 0.15 and depth < 2:
            props[name] = {"type": "object", "description": _text(rng, 3, 12),
                           **_schema(rng, depth + 1)}
        elif r < 0.3:
            props[name] = {"type": "array", "items": {"type": rng.choice(_PROP_TYPES)},
                           "description": _text(rng, 3, 10)}
        elif r < 0.4:
            props[name] = {"type": "string", "enum": [rng.choice(_WORDS) + str(k)
                                                      for k in range(rng.randint(2, 5))]}
        else:
            p: dict[str, Any] = {"type": rng.choice(_PROP_TYPES),
                                 "description": _text(rng, 2, 20)}
            if p["type"] == "integer" and rng.random() < 0.5:
                p["minimum"] = 0
            props[name] = p
    required = [k for k in props if rng.random() < 0.5]
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    if rng.random() < 0.3:
        out["additionalProperties"] = False
    return out


def tools(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        t: dict[str, Any] = {"name": f"tool_{i}_{rng.choice(['read', 'write', 'grep', 'run'])}",
                             "input_schema": _schema(rng)}
        if rng.random() < 0.9:
            t["description"] = _text(rng, 5, 80)
        if i == n - 1 and rng.random() < 0.3:
            t["cache_control"] = {"type": "ephemeral"}
        out.append(t)
    return out


def _system(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.15:
        return None
    if r < 0.6:
        return _text(rng, 5, 400)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": _text(rng, 3, 200)}
                                    for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.5:
        blocks[-1]["cache_control"] = {"type": "ephemeral"}
    return blocks


def _user_blocks(rng: random.Random) -> list[dict[str, Any]] | str:
    if rng.random() < 0.3:
        return _text(rng, 1, 120)
    blocks: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.06:
            blocks.append({"type": "image", "source": {"type": "base64",
                                                       "media_type": "image/png",
                                                       "data": png(rng)}})
        elif r < 0.35:
            doc: dict[str, Any] = {"type": "document", "source": {
                "type": "text", "media_type": "text/plain", "data": _text(rng, 20, 300)}}
            if rng.random() < 0.5:
                doc["title"] = _text(rng, 1, 5)
            blocks.append(doc)
        else:
            blocks.append({"type": "text", "text": _text(rng, 1, 150)})
    return blocks


def _tool_result(rng: random.Random, call_id: str) -> dict[str, Any]:
    b: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id}
    r = rng.random()
    if r < 0.5:
        b["content"] = _text(rng, 0, 200)
    elif r < 0.9:
        content: list[dict[str, Any]] = [{"type": "text", "text": _text(rng, 1, 100)}
                                         for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.1:
            content.append({"type": "image", "source": {"type": "base64",
                                                        "media_type": "image/png",
                                                        "data": png(rng)}})
        b["content"] = content
    if rng.random() < 0.1:
        b["is_error"] = True
    return b


def _arguments(rng: random.Random, schema: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for k, p in schema.get("properties", {}).items():
        t = p.get("type")
        if "enum" in p:
            args[k] = rng.choice(p["enum"])
        elif t == "integer":
            args[k] = rng.randint(0, 10_000)
        elif t == "number":
            args[k] = round(rng.uniform(-5, 5), 3)
        elif t == "boolean":
            args[k] = rng.random() < 0.5
        elif t == "array":
            args[k] = [rng.choice(_WORDS) for _ in range(rng.randint(0, 4))]
        elif t == "object":
            args[k] = _arguments(rng, p)
        else:
            args[k] = _text(rng, 1, 15)
    return args


def request(rng: random.Random, n: int) -> dict[str, Any]:
    """One Messages request (``max_tokens`` 1)."""
    tl = tools(rng, rng.choice([0, 0, 1, 2, 3, 5, 8, 12, 20, rng.randint(0, 20)]))
    messages: list[dict[str, Any]] = []
    for turn in range(rng.choice([0, 0, 1, 1, 2, 3, 5])):
        messages.append({"role": "user", "content": _user_blocks(rng)})
        content: list[dict[str, Any]] = []
        if rng.random() < 0.3:
            content.append({"type": "thinking", "thinking": _text(rng, 5, 120),
                            "signature": base64.b64encode(rng.randbytes(48)).decode()})
        if rng.random() < 0.05:
            content.append({"type": "redacted_thinking",
                            "data": base64.b64encode(rng.randbytes(64)).decode()})
        if rng.random() < 0.8:
            content.append({"type": "text", "text": _text(rng, 1, 150)})
        calls = []
        if tl and rng.random() < 0.6:
            for c in range(rng.randint(1, 3)):
                t = rng.choice(tl)
                call_id = f"toolu_{n:04d}_{turn}_{c}"
                calls.append(call_id)
                content.append({"type": "tool_use", "id": call_id, "name": t["name"],
                                "input": _arguments(rng, t["input_schema"])})
        if not content:
            content.append({"type": "text", "text": _text(rng, 1, 20)})
        plain = len(content) == 1 and content[0]["type"] == "text"
        messages.append({"role": "assistant",
                         "content": content[0]["text"] if plain and rng.random() < 0.2
                         else content})
        if calls:  # the results, maybe with more user blocks after them
            results: list[dict[str, Any]] = [_tool_result(rng, c) for c in calls]
            if rng.random() < 0.3:
                extra = _user_blocks(rng)
                results += ([{"type": "text", "text": extra}] if isinstance(extra, str)
                            else extra)
            messages.append({"role": "user", "content": results})
            messages.append({"role": "assistant", "content": _text(rng, 1, 60)})
    messages.append({"role": "user", "content": _user_blocks(rng)})
    body: dict[str, Any] = {"model": ALIAS, "max_tokens": 1, "messages": messages}
    system = _system(rng)
    if system is not None:
        body["system"] = system
    if tl:
        body["tools"] = tl
        if rng.random() < 0.3:
            body["tool_choice"] = rng.choice([{"type": "auto"}, {"type": "any"},
                                              {"type": "tool", "name": tl[0]["name"]}])
    if rng.random() < 0.2:
        body["temperature"] = round(rng.random(), 2)
    if rng.random() < 0.2:
        body["metadata"] = {"user_id": f"user-{rng.randint(1, 50)}"}
    return body


def corpus(n: int, seed: int = 26) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [request(rng, i) for i in range(n)]


def has_image(body: dict[str, Any]) -> bool:
    def walk(v: Any) -> bool:
        if isinstance(v, dict):
            return v.get("type") == "image" or any(walk(x) for x in v.values())
        if isinstance(v, list):
            return any(walk(x) for x in v)
        return False
    return walk(body["messages"])


def gateway_config() -> dict[str, Any]:
    """One simulated replica serving the alias, with room for the longest prompts."""
    return sim_config(replicas=1, context_window=131072)


@dataclass
class Outcome:
    """One request's counts."""

    index: int
    images: bool
    count_tokens: int = -1  # count_tokens' input_tokens
    count_header: str = ""  # its x-tokenplane-count (exact, estimated)
    engine: int = -1  # the create's input_tokens + cache reads + cache writes
    cache_read: int = 0  # of which read from the engine's prefix cache
    cache_write: int = 0
    request_id: str = ""
    estimated: int = -1  # the ledger's estimated_input_tokens
    ledger_input: int = -1  # the ledger's input_tokens (the engine's count, metered)


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        o = self.outcomes
        img = [x for x in o if x.images]
        plain = [x for x in o if not x.images]

        def share(xs: list[Outcome], a: str, b: str) -> str:
            return f"{sum(getattr(x, a) == getattr(x, b) for x in xs)}/{len(xs)}"

        return {
            "requests": len(o), "with_images": len(img),
            "count_tokens_eq_engine": share(o, "count_tokens", "engine"),
            "ledger_estimate_eq_engine": share(o, "estimated", "engine"),
            "ledger_input_eq_engine": share(o, "ledger_input", "engine"),
            "count_tokens_eq_engine_no_images": share(plain, "count_tokens", "engine"),
            "count_tokens_eq_engine_images": share(img, "count_tokens", "engine"),
            "count_header": {h: sum(x.count_header == h for x in o)
                             for h in sorted({x.count_header for x in o})},
            "with_cache_reads": sum(x.cache_read > 0 for x in o),
            "cache_read_tokens": sum(x.cache_read for x in o),
            "with_cache_writes": sum(x.cache_write > 0 for x in o),
            "engine_prompt_tokens": {"min": min(x.engine for x in o),
                                     "median": sorted(x.engine for x in o)[len(o) // 2],
                                     "max": max(x.engine for x in o)},
            "estimate_minus_engine": {str(d): n for d, n in sorted(Counter(
                x.estimated - x.engine for x in o if x.estimated != x.engine).items())},
            "mismatches": [
                {"index": x.index, "count_tokens": x.count_tokens, "estimated": x.estimated,
                 "engine": x.engine, "images": x.images}
                for x in o if not x.count_tokens == x.estimated == x.engine][:20],
        }


async def _one(client: httpx.AsyncClient, i: int, body: dict[str, Any]) -> Outcome:
    out = Outcome(i, has_image(body))
    count_body = {k: v for k, v in body.items() if k != "max_tokens"}
    r = await client.post("/v1/messages/count_tokens", json=count_body)
    r.raise_for_status()
    out.count_tokens = r.json()["input_tokens"]
    out.count_header = r.headers.get("x-tokenplane-count", "")
    r = await client.post("/v1/messages", json=body)
    r.raise_for_status()
    msg = r.json()
    u = msg["usage"]
    out.cache_read = u.get("cache_read_input_tokens") or 0
    out.cache_write = u.get("cache_creation_input_tokens") or 0
    out.engine = u["input_tokens"] + out.cache_read + out.cache_write
    out.request_id = "req_" + msg["id"].removeprefix("msg_")
    return out


def check_counts(bodies: list[dict[str, Any]], gw: GatewayThread, key: str,
                 concurrency: int = 4) -> Report:
    """Every body counted by the running gateway ``gw`` and run against its engine;
    the ledger's figures are read once ``gw`` is stopped (this stops it)."""

    async def run() -> list[Outcome]:
        sem = asyncio.Semaphore(concurrency)
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.port}", headers=headers,
                                     timeout=60) as client:
            async def guarded(i: int, b: dict[str, Any]) -> Outcome:
                async with sem:
                    return await _one(client, i, b)

            return list(await asyncio.gather(*(guarded(i, b) for i, b in enumerate(bodies))))

    outcomes = asyncio.run(run())
    gw.stop()
    rows = {r["request_id"]: r for r in gw.ledger_rows()}
    for o in outcomes:
        row = rows[o.request_id]
        o.estimated = row["estimated_input_tokens"]
        o.ledger_input = row["input_tokens"]
    return Report(outcomes)


def tool_cache_control(body: dict[str, Any]) -> bool:
    """Whether a tool of ``body`` carries ``cache_control``."""
    return any("cache_control" in t for t in body.get("tools", ()))
