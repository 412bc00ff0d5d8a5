"""The access log: one JSON line per request (inference routes from the pipeline's
finisher, the other routes from the aiohttp application), on by default, sampled or
off by config, never holding the key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.gateway.harness import GatewayThread, sim_config

MODEL = "sim-llama3-8b"
MSGS: list[Any] = [{"role": "user", "content": "hello there"}]


def _serve(tmp_path: Path, access_log: dict[str, Any] | None) -> tuple[GatewayThread, Path]:
    cfg = sim_config(replicas=1)
    log = tmp_path / "access.jsonl"
    if access_log is not None:
        cfg["observe"] = {"access_log": {"path": str(log), **access_log}}
    return GatewayThread(cfg, tmp_path / "home").start(), log


def _traffic(gw: GatewayThread) -> tuple[str, str]:
    key = gw.create_key("acme", app="web")
    c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    r = c.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=3)
    for _ in c.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=2, stream=True,
                                       stream_options={"include_usage": True}):
        pass
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="nosuch", messages=MSGS)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gw.base_url, api_key="tp-wrong", max_retries=0
                      ).chat.completions.create(model=MODEL, messages=MSGS)
    assert [m.id for m in c.models.list()] == [MODEL]
    assert httpx.get(gw.base_url.removesuffix("/v1") + "/nowhere", timeout=10).status_code == 404
    return key, r.id


def _lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_one_line_per_request_with_who_what_and_how_long(tmp_path: Path) -> None:
    gw, log = _serve(tmp_path, {})
    try:
        key, _ = _traffic(gw)
    finally:
        gw.stop()  # flushes the log
    lines = _lines(log)
    text = log.read_text()
    assert key not in text and "tp-wrong" not in text  # key ids only, never keys
    chats = [r for r in lines if r["path"] == "/v1/chat/completions"]
    assert [(r["status"], r["outcome"]) for r in chats] == \
        [(200, "ok"), (200, "ok"), (404, "error"), (401, "error")]
    ok, streamed, missing, unauth = chats
    assert ok["tenant"] == "acme" and ok["app"] == "web" and ok["key_id"]
    assert ok["model"] == MODEL and ok["backend"] and ok["stream"] is False
    assert ok["prompt_tokens"] > 0 and ok["completion_tokens"] == 3
    assert ok["duration_ms"] > 0 and ok["method"] == "POST"
    assert ok["request_id"] and ok["time"].endswith("Z") and ok["time"][10] == "T"
    assert streamed["stream"] is True and streamed["completion_tokens"] == 2
    assert streamed["duration_ms"] >= streamed["ttft_ms"] > 0
    assert missing["error_code"] == "model_not_found" and missing["ttft_ms"] is None
    assert unauth["tenant"] is None and unauth["error_code"] == "invalid_api_key"
    others = {(r["method"], r["path"]): r for r in lines if r["path"] != "/v1/chat/completions"}
    assert others["GET", "/v1/models"]["status"] == 200
    assert others["GET", "/nowhere"]["status"] == 404 and others["GET", "/nowhere"]["request_id"]


def test_sampled_keeps_errors_and_off_writes_nothing(tmp_path: Path) -> None:
    gw, log = _serve(tmp_path / "sampled", {"sample": 0})
    try:
        _traffic(gw)
    finally:
        gw.stop()
    assert sorted(r["status"] for r in _lines(log)) == [401, 404, 404]  # errors only
    gw, log = _serve(tmp_path / "off", {"enabled": False})
    try:
        _traffic(gw)
    finally:
        gw.stop()
    assert not log.exists()


def test_on_by_default_to_stderr(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    gw, _ = _serve(tmp_path, None)
    try:
        key = gw.create_key("acme", app="web")
        openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0
                      ).chat.completions.create(model=MODEL, messages=MSGS, max_tokens=2)
    finally:
        gw.stop()
    err = capfd.readouterr().err
    records = [json.loads(ln) for ln in err.splitlines() if ln.startswith('{"time"')]
    assert [(r["path"], r["status"], r["app"]) for r in records] == \
        [("/v1/chat/completions", 200, "web")]
