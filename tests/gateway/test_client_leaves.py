"""A client that leaves a non-stream request (issue 13, item 2): the gateway notices
the closed connection while it waits on the upstream, drops the upstream connection
(the engine aborts the request), bills the prompt, records ``cancelled`` / 499, and
gives back every admission reservation at once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.gateway.fake_upstream import FakeUpstream
from tests.gateway.harness import GatewayThread, sim_config
from tests.gateway.raw_http import Client, request
from tests.gateway.sim_process import engine_metric, start_sim, stop_sim
from tokenplane.api.front.protocol import FrontConnection
from tokenplane.meta.limit_store import LimitTarget


def _engine_until(port: int, running: int, timeout: float, what: str) -> None:
    """Poll the simulated engine's ``vllm:num_requests_running`` (another process: no
    event to wait on) until it reads ``running``; each poll is an HTTP round trip, so
    no sleep is needed between them."""
    deadline = time.monotonic() + timeout
    while engine_metric(port, "vllm:num_requests_running") != running:
        if time.monotonic() > deadline:
            raise AssertionError(what)


def test_a_client_that_leaves_a_non_stream_call_stops_the_engine(tmp_path: Path) -> None:
    proc, ports = start_sim(replicas=1, profile="llama3-8b-a100")  # ~100 tokens/s
    port = ports[0]
    try:
        cfg = {"models": [{
            "alias": "m", "tokenizer": "cl100k_base", "chat_template": "llama3",
            "context_window": 8192,
            "backends": [{"id": "remote", "type": "vllm",
                          "base_url": f"http://127.0.0.1:{port}", "model": "sim-llama3-8b"}],
        }]}
        gw = GatewayThread(cfg, tmp_path).start()
        key = gw.create_key(app="left")
        body = orjson.dumps({"model": "m", "max_tokens": 2500,
                             "messages": [{"role": "user", "content": "write a long story"}]})
        with Client(gw.port) as c:
            c.send(request("POST", "/v1/chat/completions", body, headers={
                "authorization": f"Bearer {key}", "content-type": "application/json"}))
            _engine_until(port, 1, 10, "the request did not reach the engine")
        # the client gave up (as one whose SDK timed out after 1 s does)
        # without the fix the engine generates all 2,500 tokens (25 s)
        _engine_until(port, 0, 5, "the engine kept generating after the client left")
        generated = engine_metric(port, "vllm:generation_tokens_total")
        assert generated < 1000  # stopped within a few steps of the client leaving
        gw.stop()
        (row,) = gw.ledger_rows("app = 'left'")
        assert (row["status"], row["http_status"], row["error_code"]) == \
            ("cancelled", 499, "client_disconnected")
        # the prompt reached the engine and is billed; the answer was never delivered
        assert row["input_tokens"] > 0 and row["output_tokens"] == 0
        assert row["usage_source"] == "estimated"
    finally:
        stop_sim(proc)


def test_clients_that_leave_hung_calls_give_back_their_slots(tmp_path: Path) -> None:
    n = 4
    upstream = FakeUpstream().start()
    try:
        cfg = {"models": [{"alias": "m", "tokenizer": "cl100k_base", "backends": [
            {"type": "vllm", "base_url": upstream.base_url}]}]}
        gw = GatewayThread(cfg, tmp_path).start()
        assert gw.gateway.admission is not None
        gw.gateway.admission.limits.set(LimitTarget("conc"), {"max_concurrent": n})
        key = gw.create_key("conc", app="hung")
        body = orjson.dumps({"model": "m", "user": "hang",
                             "messages": [{"role": "user", "content": "hi"}]})
        clients = [Client(gw.port) for _ in range(n)]
        for c in clients:
            c.send(request("POST", "/v1/chat/completions", body, headers={
                "authorization": f"Bearer {key}", "content-type": "application/json"}))
        upstream.wait_until(lambda u: u.hanging == n, 10,
                            "the hung calls did not reach the upstream")
        for c in clients:
            c.close()  # they give up
        # the gateway dropped its upstream connections (the upstream saw them close)
        upstream.wait_until(lambda u: u.hanging == 0, 5,
                            "the gateway kept its upstream connections")
        # and gave back every max_concurrent slot: n new calls run at once
        with openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0) as client, \
                ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(lambda _: client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]), range(n)))
        assert all(a.choices[0].message.content for a in answers)
        gw.stop()
        rows = gw.ledger_rows("app = 'hung'")
        left = [r for r in rows if r["status"] != "ok"]
        assert len(left) == n and len(rows) == 2 * n
        assert {(r["status"], r["http_status"], r["error_code"]) for r in left} == \
            {("cancelled", 499, "client_disconnected")}
    finally:
        upstream.stop()


def test_a_client_that_leaves_a_silent_stream_is_noticed_at_once(tmp_path: Path) -> None:
    """A stream whose upstream sent its head and then nothing (a queued engine, a long
    think, a hung server): the client leaving is noticed without waiting for a token
    or for ``first_token`` (60 s)."""
    upstream = FakeUpstream().start()
    try:
        cfg = {"models": [{"alias": "m", "tokenizer": "cl100k_base", "backends": [
            {"type": "vllm", "base_url": upstream.base_url}]}]}
        gw = GatewayThread(cfg, tmp_path).start()
        key = gw.create_key(app="silent")
        body = orjson.dumps({"model": "m", "user": "hang-stream", "stream": True,
                             "messages": [{"role": "user", "content": "hi"}]})
        with Client(gw.port) as c:
            c.send(request("POST", "/v1/chat/completions", body, headers={
                "authorization": f"Bearer {key}", "content-type": "application/json"}))
            head = b""
            while b"\r\n\r\n" not in head:  # the stream started: the gateway relays
                head += c.sock.recv(4096)
            assert head.startswith(b"HTTP/1.1 200")
        upstream.wait_until(lambda u: u.hanging == 0, 5, "the gateway kept the silent stream")
        gw.stop()
        (row,) = gw.ledger_rows("app = 'silent'")
        assert (row["status"], row["http_status"], row["error_code"]) == \
            ("cancelled", 499, "client_disconnected")
        assert row["output_tokens"] == 0
    finally:
        upstream.stop()


def test_a_stream_whose_client_left_before_its_head_is_still_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client is gone when the stream's head is to be written (it left just as the
    upstream answered): the stream is never iterated, yet its upstream is closed, its
    reservation released and its usage recorded (once)."""
    gw = GatewayThread(sim_config(replicas=1), tmp_path).start()
    try:
        assert gw.gateway.admission is not None
        gw.gateway.admission.limits.set(LimitTarget("one"), {"max_concurrent": 1})
        key = gw.create_key("one", app="early")
        start_stream = FrontConnection.start_stream
        calls: list[int] = []
        reached = threading.Event()

        def gone_once(self: FrontConnection, *args: Any) -> None:
            calls.append(1)
            if len(calls) == 1:
                reached.set()
                raise ConnectionResetError("the client closed the connection")
            start_stream(self, *args)

        monkeypatch.setattr(FrontConnection, "start_stream", gone_once)
        body = {"model": "sim-llama3-8b", "stream": True, "max_tokens": 5,
                "messages": [{"role": "user", "content": "hi"}]}
        with Client(gw.port, timeout=5) as c:
            c.send(request("POST", "/v1/chat/completions", orjson.dumps(body), headers={
                "authorization": f"Bearer {key}", "content-type": "application/json"}))
            assert reached.wait(10), "the stream did not reach its head"
        # the only max_concurrent slot is free again
        resp = httpx.post(gw.base_url + "/chat/completions", timeout=30, json=body,
                          headers={"authorization": f"Bearer {key}"})
        assert resp.status_code == 200, resp.text
    finally:
        gw.stop()
    rows = gw.ledger_rows("app = 'early'")
    assert sorted(r["status"] for r in rows) == ["cancelled", "ok"]
