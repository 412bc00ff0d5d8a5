"""The front's connections over time: idle keep-alive timeout, a client that stops
reading and then leaves mid-stream, a client that leaves before its answer, and the
graceful stop (requests in flight finish, new connections are refused)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import orjson
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tests.gateway.raw_http import Answer, Client, request
from tokenplane.api.front.protocol import FrontConnection
from tokenplane.api.front.wire import FrontRequest

MODEL = "sim-llama3-8b"


def chat(key: str, max_tokens: int, stream: bool = False) -> bytes:
    body = orjson.dumps({"model": MODEL, "max_tokens": max_tokens, "stream": stream,
                         "messages": [{"role": "user", "content": "write a long story"}]})
    return request("POST", "/v1/chat/completions", body,
                   headers={"authorization": f"Bearer {key}"})


def test_idle_connection_closed_after_keepalive(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1, profile="llama3-8b-a100"), tmp_path).start()
    try:
        assert gw.server is not None and gw.server.front is not None
        gw.server.front.keepalive_s = 0.3
        key = gw.create_key("default")
        with Client(gw.port) as c:
            c.send(chat(key, 2))
            assert c.answer().status == 200
            t0 = time.monotonic()
            assert c.closed_by_server()
            assert 0.2 < time.monotonic() - t0 < 5
        with Client(gw.port) as c:  # a request that keeps the connection busy is not cut
            t0 = time.monotonic()
            c.send(chat(key, 60, stream=True))  # ~10 ms a token on this profile
            answer = c.answer()
            assert answer.status == 200 and b"data: [DONE]" in answer.body
            assert time.monotonic() - t0 > 0.3  # busy for longer than the keep-alive
    finally:
        gw.stop()


def test_slow_reader_then_leaves_mid_stream(tmp_path: Path) -> None:
    """The client stops reading: the front waits on the socket (back-pressure) rather
    than buffering the stream; when the client leaves, the stream is closed and the
    request billed as cancelled."""
    gw = GatewayThread(sim_config(replicas=1), tmp_path).start()
    key = gw.create_key("default", app="slow")
    assert gw.server is not None and gw.server.front is not None
    front = gw.server.front
    c = Client(gw.port, rcvbuf=4096)
    c.send(request("GET", "/health"))
    assert c.answer().status == 200  # the connection is the front's now
    conn = next(iter(front.connections))
    assert conn.transport is not None  # small socket buffers: back-pressure comes early
    conn.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    paused = threading.Event()
    pause_writing = conn.pause_writing

    def observed_pause() -> None:  # the transport calls it when its buffer is full
        pause_writing()
        paused.set()

    conn.pause_writing = observed_pause  # type: ignore[method-assign]
    c.send(chat(key, 3800, stream=True))
    assert paused.wait(10), "the front never waited on the socket"
    assert conn.write_paused
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    c.close()  # a reset: the client is gone at once
    gw.stop()  # waits for the request whose client left to end and be billed
    rows = gw.ledger_rows("app = 'slow'")
    assert len(rows) == 1 and rows[0]["status"] == "cancelled"
    assert 0 < rows[0]["output_tokens"] < 3800


def test_client_leaves_before_a_whole_answer(tmp_path: Path) -> None:
    """A non-stream request whose client left is cancelled at once (its upstream call
    dropped, issue 13 item 2), and still recorded once: a stop waits for it."""
    gw = GatewayThread(sim_config(replicas=1, profile="llama3-8b-a100"), tmp_path).start()
    key = gw.create_key("default", app="gone")
    assert gw.server is not None and gw.server.front is not None
    front = gw.server.front
    started = threading.Event()
    serve = front.serve

    async def observed_serve(conn: FrontConnection, req: FrontRequest) -> None:
        started.set()
        await serve(conn, req)

    front.serve = observed_serve  # type: ignore[method-assign]
    with Client(gw.port) as c:
        c.send(chat(key, 40))  # ~0.4 s on this profile
        assert started.wait(10)
    gw.stop()  # waits for the request whose client left to end and be billed
    rows = gw.ledger_rows("app = 'gone'")
    assert len(rows) == 1 and (rows[0]["status"], rows[0]["http_status"]) == ("cancelled", 499)
    assert rows[0]["output_tokens"] == 0  # the answer was never delivered


def test_graceful_stop_finishes_requests_in_flight(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1, profile="llama3-8b-a100"), tmp_path).start()
    key = gw.create_key("default", app="stop")
    port = gw.port
    idle = Client(port)
    idle.send(request("GET", "/health"))
    assert idle.answer().status == 200
    busy = Client(port)
    busy.send(chat(key, 60, stream=True))
    busy.first_piece()  # the stream is under way
    answers: list[Answer] = []
    reader = threading.Thread(target=lambda: answers.append(busy.answer()))
    reader.start()
    assert gw.server is not None
    gw.call(gw.server.stop())
    reader.join(10)
    assert answers and answers[0].status == 200
    assert answers[0].body.endswith(b"data: [DONE]\n\n")
    assert answers[0].headers.get("transfer-encoding") == "chunked"
    assert busy.closed_by_server() and idle.closed_by_server()
    busy.close()
    idle.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
    gw.server = None
    gw.stop()
    assert [r["status"] for r in gw.ledger_rows("app = 'stop'")] == ["ok"]


def test_stop_timeout_cancels_what_is_left(tmp_path: Path) -> None:
    gw = GatewayThread(sim_config(replicas=1, profile="llama3-8b-a100"), tmp_path).start()
    key = gw.create_key("default", app="cut")
    assert gw.server is not None
    gw.server.shutdown_timeout = 0.3
    with Client(gw.port) as c:
        c.send(chat(key, 3000, stream=True))
        c.first_piece()
        t0 = time.monotonic()
        gw.call(gw.server.stop())
        assert time.monotonic() - t0 < 5
        assert c.closed_by_server()
    gw.server = None
    gw.call(asyncio.sleep(0))
    gw.stop()
    rows = gw.ledger_rows("app = 'cut'")
    assert len(rows) == 1 and rows[0]["status"] == "cancelled"
