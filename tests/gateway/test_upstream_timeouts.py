"""Upstream timeouts of a non-stream call (issue 13, item 12): a hung upstream answers
504 ``upstream_timeout`` after ``non_stream_head`` (not after ``total``), an answer
whose body stops mid-way after ``between_tokens``; either attempt is billed zero and
gives its admission slot back at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.fake_upstream import FakeUpstream
from tests.gateway.harness import GatewayThread
from tokenplane.config.schema import TimeoutConfig
from tokenplane.meta.limit_store import LimitTarget


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    u = FakeUpstream().start()
    yield u
    u.stop()


def _gateway(upstream: FakeUpstream, home: Path, **timeouts: float) -> GatewayThread:
    cfg = {"models": [{"alias": "m", "tokenizer": "cl100k_base", "backends": [
        {"type": "vllm", "base_url": upstream.base_url, "timeouts": timeouts}]}]}
    gw = GatewayThread(cfg, home).start()
    assert gw.gateway.admission is not None
    gw.gateway.admission.limits.set(LimitTarget("t"), {"max_concurrent": 1})
    return gw


def _chat(gw: GatewayThread, key: str, mode: str) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    resp = httpx.post(gw.base_url + "/chat/completions", timeout=30,
                      headers={"authorization": f"Bearer {key}"},
                      json={"model": "m", "user": mode,
                            "messages": [{"role": "user", "content": "hi"}]})
    return resp, time.monotonic() - start


def _timed_out(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 504, resp.text
    assert "x-request-id" in resp.headers
    err: dict[str, Any] = resp.json()["error"]
    assert err["code"] == "upstream_timeout"
    return err


def test_defaults_bound_a_non_stream_head() -> None:
    t = TimeoutConfig()
    assert (t.connect, t.first_token, t.non_stream_head, t.between_tokens, t.total) == \
        (5, 60, 300, 30, 600)


def test_a_hung_non_stream_call_ends_at_its_head_timeout(upstream: FakeUpstream,
                                                          tmp_path: Path) -> None:
    gw = _gateway(upstream, tmp_path, non_stream_head=0.5, total=60)
    try:
        key = gw.create_key("t", app="hung")
        resp, took = _chat(gw, key, "hang")
        assert "response" in _timed_out(resp)["message"]
        assert took < 10  # not the 60 s total
        # the slot is free again at once (max_concurrent 1)
        ok, _ = _chat(gw, key, "")
        assert ok.status_code == 200, ok.text
    finally:
        gw.stop()
    rows = gw.ledger_rows("app = 'hung'")
    (row,) = [r for r in rows if r["status"] != "ok"]
    assert (row["status"], row["http_status"], row["error_code"]) == \
        ("error", 504, "upstream_timeout")
    assert row["input_tokens"] == 0 and row["output_tokens"] == 0  # never answered


def test_a_body_that_stops_mid_way_ends_at_between_tokens(upstream: FakeUpstream,
                                                         tmp_path: Path) -> None:
    gw = _gateway(upstream, tmp_path, between_tokens=0.5, total=60)
    try:
        resp, took = _chat(gw, gw.create_key("t", app="stall"), "stall-body")
        assert "rest of the answer" in _timed_out(resp)["message"]
        assert took < 10
    finally:
        gw.stop()
