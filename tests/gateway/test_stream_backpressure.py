"""Streams whose client stops reading (issue 13, item 10): the gateway stops reading
the upstream after a bounded amount, ends the stream after the stall time (the
upstream connection dropped, the ledger says cancelled / ``client_stalled`` and bills
what was relayed), and a stream keeps O(its text) of state, not its events."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from tests.gateway.fake_upstream import FLOOD, FLOOD_EVENT, FakeUpstream
from tests.gateway.harness import GatewayThread
from tests.gateway.raw_http import Client, request
from tokenplane.operations.chat import CHAT
from tokenplane.pipeline.context import RequestContext
from tokenplane.pipeline.relayed import FOLD_BYTES
from tokenplane.pipeline.upstream_call import relay, relayed_text
from tokenplane.upstream.http1_client import H1Connection
from tokenplane.upstream.types import UpstreamResponse


def _retained(relayed: object) -> int:
    """Bytes the relay keeps for a stream (a list of events before issue 13)."""
    if isinstance(relayed, list):
        return sum(len(ev) for ev in relayed)
    return int(relayed.retained_bytes())  # type: ignore[attr-defined]


def test_a_long_stream_keeps_its_text_not_its_events() -> None:
    words = [f" w{i % 97}" for i in range(3000)]
    events = [b"data: " + orjson.dumps({
        "id": "chatcmpl-0123456789abcdef0123456789abcdef", "object": "chat.completion.chunk",
        "created": 1700000000, "model": "some-model",
        "choices": [{"index": 0, "delta": {"content": w}, "logprobs": None,
                     "finish_reason": None}]}) + b"\n\n" for w in words]

    async def upstream() -> AsyncIterator[bytes]:
        for i in range(0, len(events), 3):  # a few events per read, as they arrive
            yield b"".join(events[i:i + 3])

    async def run() -> RequestContext:
        ctx = RequestContext("r", "/v1/chat/completions", CHAT, b"", {})
        ctx.stream = True
        async for _ in relay(ctx, UpstreamResponse(200, {}, events=upstream())):
            pass
        return ctx

    ctx = asyncio.run(run())
    assert ctx.chunks == 3000 and ctx.status == "ok"
    relayed_bytes = sum(len(ev) for ev in events)  # ~600 KB
    kept = _retained(ctx.relayed)
    text = "".join(words)
    assert kept <= FOLD_BYTES + 2 * len(text), (kept, relayed_bytes)
    assert relayed_text(ctx) == (text, "")  # what the meter counts when usage never came


@pytest.fixture(scope="module")
def upstream() -> FakeUpstream:
    u = FakeUpstream().start()
    yield u  # type: ignore[misc]
    u.stop()


def test_a_client_that_reads_nothing_stops_the_upstream_and_is_ended(
        upstream: FakeUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read = [0]
    received = H1Connection.data_received

    def counting(self: H1Connection, data: bytes) -> None:
        read[0] += len(data)
        received(self, data)

    monkeypatch.setattr(H1Connection, "data_received", counting)
    cfg = {"server": {"stream_stall_timeout_s": 1.0},
           "models": [{"alias": "m", "tokenizer": "cl100k_base", "backends": [
               {"type": "vllm", "base_url": upstream.base_url}]}]}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        key = gw.create_key(app="stall")
        body = orjson.dumps({"model": "m", "user": "flood", "stream": True,
                             "messages": [{"role": "user", "content": "hi"}]})
        c = Client(gw.port, rcvbuf=4096)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.send(request("POST", "/v1/chat/completions", body, headers={
            "authorization": f"Bearer {key}", "content-type": "application/json"}))
        start = time.monotonic()
        # the client reads nothing: the stream is ended after the stall time, and the
        # gateway drops the upstream connection (the flood stops, unfinished)
        upstream.wait_until(lambda u: u.flood_bytes > 0 and u.flooding == 0, 15,
                            "the stalled stream was not ended")
        assert time.monotonic() - start < 10
        assert upstream.flood_bytes < FLOOD * len(FLOOD_EVENT)  # cut short
        # the gateway read a bounded amount of the upstream's flood
        assert read[0] < 512 * 1024, read[0]
        c.close()
    finally:
        gw.stop()
    (row,) = gw.ledger_rows("app = 'stall'")
    assert (row["status"], row["http_status"], row["error_code"]) == \
        ("cancelled", 499, "client_stalled")
    assert row["usage_source"] == "estimated"
    # billed what was relayed to the client's connection: bounded by what was read
    # from the upstream (one token per event), a small part of the flood
    assert 0 < row["output_tokens"] <= read[0] // len(FLOOD_EVENT)
    assert row["output_tokens"] < FLOOD // 10


def test_a_stalled_client_is_ended_at_the_stall_time_not_the_upstreams_silence(
        upstream: FakeUpstream, tmp_path: Path) -> None:
    """Back-pressure is not upstream silence (issue 33, finding 6): with
    ``between_tokens`` (1 s) shorter than ``stream_stall_timeout_s`` (3 s), a client
    that reads nothing is ended at the stall time and recorded ``client_stalled``, not
    cut at the upstream's ``between_tokens`` and recorded ``client_disconnected``."""
    cfg = {"server": {"stream_stall_timeout_s": 3.0},
           "models": [{"alias": "m", "tokenizer": "cl100k_base", "backends": [
               {"type": "vllm", "base_url": upstream.base_url,
                "timeouts": {"first_token": 1.0, "between_tokens": 1.0}}]}]}
    gw = GatewayThread(cfg, tmp_path).start()
    try:
        key = gw.create_key(app="stall2")
        body = orjson.dumps({"model": "m", "user": "flood", "stream": True,
                             "messages": [{"role": "user", "content": "hi"}]})
        before = upstream.flood_bytes  # the module's upstream: earlier floods counted
        c = Client(gw.port, rcvbuf=4096)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.send(request("POST", "/v1/chat/completions", body, headers={
            "authorization": f"Bearer {key}", "content-type": "application/json"}))
        start = time.monotonic()
        upstream.wait_until(lambda u: u.flood_bytes > before, 10, "no flood began")
        upstream.wait_until(lambda u: u.flooding == 0, 20,
                            "the stalled stream was not ended")
        took = time.monotonic() - start
        assert 2.5 <= took < 15, took  # the stall time, not between_tokens
        c.close()
    finally:
        gw.stop()
    (row,) = gw.ledger_rows("app = 'stall2'")
    assert (row["status"], row["http_status"], row["error_code"]) == \
        ("cancelled", 499, "client_stalled")
