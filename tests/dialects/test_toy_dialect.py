"""A new dialect end to end: the toy "Shout" dialect (``tests/dialects/toy_dialect.py``)
registered beside the standard operations, served by a gateway with simulated engines:
its requests counted, admitted and metered like any other (the ledger's operation is its
name), its answers, streams and errors in its own format, its own auth header."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.dialects.toy_dialect import SHOUT_OPERATION
from tests.gateway.harness import sim_config
from tokenplane.api.openai_routes import OpenAIRoutes, RequestIds, envelope_middleware
from tokenplane.app import build_gateway
from tokenplane.compose.config_file import validate_config
from tokenplane.operations.registry import standard_operations

MODEL = "sim-llama3-8b"


async def _run(home: Path) -> dict[str, Any]:
    cfg = sim_config(replicas=1)
    cfg["data_dir"] = str(home)
    config = validate_config(cfg)
    gw = build_gateway(config)
    await gw.start()
    key, _ = gw.keys.create_key("default", app="toy")
    ops = standard_operations().with_operations(SHOUT_OPERATION)
    ids = RequestIds()
    app = web.Application(middlewares=[envelope_middleware(ids, ops.dialect_for)])
    OpenAIRoutes(gw.pipeline, gw.keys, gw.metrics, gw.models_for,
                 config.server.max_body_bytes, new_id=ids, operations=ops).install(app)
    out: dict[str, Any] = {}
    try:
        async with TestClient(TestServer(app)) as client:
            h = {"x-shout-key": key, "content-type": "application/json"}
            r = await client.post("/v1/shout", data=orjson.dumps(
                {"model": MODEL, "say": "hello there", "limit": 7}), headers=h)
            out["whole"] = (r.status, await r.json())
            r = await client.post("/v1/shout", data=orjson.dumps(
                {"model": MODEL, "say": "hello there", "limit": 5, "stream": True}), headers=h)
            out["stream"] = (r.status, await r.read())
            r = await client.post("/v1/shout", data=orjson.dumps({"model": MODEL}), headers=h)
            out["bad"] = (r.status, await r.json())
            r = await client.post("/v1/shout", data=orjson.dumps(
                {"model": MODEL, "say": "x"}), headers={"authorization": f"Bearer {key}"})
            out["auth"] = (r.status, await r.json())
        out["prompt"] = len(gw.counters.prompt_ids(MODEL).messages(
            [{"role": "user", "content": "hello there"}], None))
    finally:
        await gw.close()
    db = sqlite3.connect(home / "ledger.db")
    try:
        out["rows"] = list(db.execute(
            "SELECT operation, status, input_tokens, estimated_input_tokens, output_tokens "
            "FROM usage_events ORDER BY ts"))
    finally:
        db.close()
    return out


def test_a_toy_dialect_end_to_end(tmp_path: Path) -> None:
    out = asyncio.run(_run(tmp_path))
    status, whole = out["whole"]
    assert status == 200 and whole["shout"] == whole["shout"].upper() and whole["shout"]
    assert whole["used"] == {"in": out["prompt"], "out": 7}
    status, raw = out["stream"]
    events = [orjson.loads(e.removeprefix(b"data: ")) for e in raw.split(b"\n\n") if e]
    assert status == 200 and len([e for e in events if "piece" in e]) == 5
    assert events[-1] == {"end": True, "used": {"in": out["prompt"], "out": 5}}
    status, bad = out["bad"]
    assert status == 400 and bad == {"oops": "say something", "field": "say"}
    status, auth = out["auth"]  # the toy accepts its own header only
    assert status == 401 and "x-shout-key" in auth["oops"]
    ok = [r for r in out["rows"] if r[1] == "ok"]
    assert [r[0] for r in ok] == ["shout", "shout"]
    assert all(r[2] == r[3] == out["prompt"] for r in ok)  # counted before, billed exactly
    assert [r[4] for r in ok] == [7, 5]
