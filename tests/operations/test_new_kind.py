"""A new endpoint kind is one Operation subclass plus its registration.

``EchoKind`` (``/v1/echo-kind``, test-only) is registered in a registry of its own;
nothing else in the gateway is touched, yet validation, counting, the output cap,
prefix blocks for routing, the route itself and the ledger's operation name all come
from it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.gateway.harness import sim_config
from tokenplane.api.openai_routes import OpenAIRoutes, RequestIds, envelope_middleware
from tokenplane.app import build_gateway
from tokenplane.compose.config_file import validate_config
from tokenplane.errors import GatewayError, invalid
from tokenplane.operations.base import Operation, Segment
from tokenplane.operations.completions import COMPLETIONS
from tokenplane.operations.prefix import text_segments
from tokenplane.operations.registry import OperationRegistry, standard_operations
from tokenplane.operations.validate import check_type
from tokenplane.routing.gateway.prompt_blocks import request_block_hashes
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.model_counters import ModelCounters
from tokenplane.tokens.prompt_parts import PartCounter

MODEL = "sim-llama3-8b"


class EchoKind(Operation):
    """A toy kind: ``{"model", "text", "max_tokens"?}`` in, a completion-shaped echo out."""

    __slots__ = ()

    path = "/v1/echo-kind"
    name = "echo"
    cap_fields = ("max_tokens",)
    content_field = "text"
    chunk_object = "echo.chunk"

    def validate(self, body: dict[str, Any]) -> None:
        if not isinstance(body.get("model"), str) or not body["model"]:
            raise invalid("you must provide a model parameter", param="model",
                          code="missing_required")
        if "text" not in body:
            raise invalid("'text' is a required property", param="text", code="missing_required")
        check_type("text", body["text"], (str,), "a string")

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        return counter.prompt(body["text"])

    def prefix_segments(self, body: dict[str, Any]) -> list[Segment]:
        return text_segments(body["text"])

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        return {"index": 0, "text": "", "finish_reason": finish_reason}

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        return {"index": index, "text": text, "finish_reason": None}


ECHO = EchoKind()


def _registry() -> OperationRegistry:
    return standard_operations().with_operations(ECHO)


def test_the_registry_is_the_one_place_a_kind_is_added() -> None:
    reg = _registry()
    assert reg["/v1/echo-kind"] is ECHO and reg.named("echo") is ECHO
    assert "/v1/echo-kind" in reg and "/v1/echo-kind" not in standard_operations()
    assert len(reg) == len(standard_operations()) + 1
    with pytest.raises(ValueError):
        reg.with_operations(ECHO)  # a path (and a name) is registered once


def test_the_standard_kinds_keep_the_ledger_names() -> None:
    # the ledger's ``operation`` values of every report and rollup so far
    assert tuple(op.name for op in standard_operations()) == (
        "chat", "text_completion", "embeddings", "messages")
    assert standard_operations().paths == (
        "/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/messages")


def test_validation_cap_counting_and_prefix_blocks_come_from_the_operation() -> None:
    with pytest.raises(GatewayError) as err:
        ECHO.validate({"model": MODEL, "text": 3})
    assert (err.value.status, err.value.param, err.value.code) == (400, "text", "invalid_type")
    assert ECHO.requested_max_tokens({"max_tokens": 5, "max_completion_tokens": 9}) == 5
    assert ECHO.cap_param({"max_completion_tokens": 9}) == "max_tokens"
    cfg = validate_config(sim_config())
    counters = ModelCounters(cfg.models)
    text = "the quick brown fox jumps over the lazy dog " * 20
    echo = counters.count(cfg.models[0], ECHO, {"text": text}).counts
    as_prompt = counters.count(cfg.models[0], COMPLETIONS, {"prompt": text}).counts
    assert echo == as_prompt and echo.prompt > 0
    assert request_block_hashes(ECHO, {"text": text}, 600, 16) == request_block_hashes(
        COMPLETIONS, {"prompt": text}, 600, 16) != []


async def _echo_upstream(request: web.Request) -> web.Response:
    body = await request.json()
    return web.json_response({
        "id": "echo-1", "object": "echo", "created": 0, "model": "echo-upstream",
        "choices": [{"index": 0, "text": body["text"], "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})


async def _run(home: Path) -> tuple[list[tuple[int, Any]], list[str]]:
    upstream = web.Application()
    upstream.router.add_post("/v1/echo-kind", _echo_upstream)
    async with TestServer(upstream) as up:
        cfg = sim_config(backends=[{"id": "echo", "type": "openai",
                                    "base_url": str(up.make_url("")).rstrip("/")}])
        cfg["data_dir"] = str(home)
        config = validate_config(cfg)
        gw = build_gateway(config)
        await gw.start()
        key, _ = gw.keys.create_key("default")
        ids = RequestIds()
        app = web.Application(middlewares=[envelope_middleware(ids)])
        OpenAIRoutes(gw.pipeline, gw.keys, gw.metrics, gw.models_for,
                     config.server.max_body_bytes, new_id=ids, operations=_registry()).install(app)
        out: list[tuple[int, Any]] = []
        try:
            async with TestClient(TestServer(app)) as client:
                headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
                for body in ({"model": MODEL, "text": 42}, {"model": MODEL, "text": "hi there"}):
                    resp = await client.post("/v1/echo-kind", data=orjson.dumps(body),
                                             headers=headers)
                    out.append((resp.status, await resp.json()))
        finally:
            await gw.close()
    db = sqlite3.connect(home / "ledger.db")
    try:
        ops = [r[0] for r in db.execute("SELECT operation FROM usage_events")]
    finally:
        db.close()
    return out, ops


def test_a_registered_kind_is_served_and_metered_under_its_name(tmp_path: Path) -> None:
    replies, ops = asyncio.run(_run(tmp_path))
    (bad_status, bad), (ok_status, ok) = replies
    assert bad_status == 400
    assert bad["error"]["param"] == "text" and bad["error"]["code"] == "invalid_type"
    assert ok_status == 200 and ok["choices"][0]["text"] == "hi there"
    assert ops and set(ops) == {"echo"}  # the ledger's operation is the kind's name
