"""Slow and many clients (issue 13, item 1): a request head or body that trickles in
is answered 408 by its deadline however often a byte arrives (slowloris); connections
over the per-address and total caps are answered 503 while other clients, and
``/health``, are still served; the application behind the front listens on no port
of its own, so nothing walks around those limits."""

from __future__ import annotations

import os
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.gateway.harness import GatewayThread, sim_config
from tests.gateway.raw_http import Answer, Client, request

MODEL = "sim-llama3-8b"
TRICKLE_S = 0.05  # a byte this often: the idle timer (0.3 s here) never fires


def gateway(tmp_path: Path, **server: Any) -> GatewayThread:
    cfg = {**sim_config(replicas=1), "server": server}
    return GatewayThread(cfg, tmp_path).start()


def trickle(c: Client, data: bytes, limit_s: float = 10.0) -> tuple[Answer, float]:
    """Sends ``data`` a byte at a time until the server answers; the answer and how
    many seconds after the first byte it came. Fails if all was sent unanswered or
    nothing came within ``limit_s``."""
    t0 = time.monotonic()
    for i in range(len(data)):
        readable, _, _ = select.select([c.sock], [], [], TRICKLE_S)
        if readable:
            return c.answer(), time.monotonic() - t0
        assert time.monotonic() - t0 < limit_s, f"still open after {limit_s} s"
        c.send(data[i:i + 1])
    raise AssertionError("the whole request trickled in unanswered")


def assert_timed_out(answer: Answer, c: Client) -> None:
    assert answer.status == 408, answer.body
    err = answer.json()["error"]
    assert err["code"] == "request_timeout"
    assert answer.headers["x-request-id"].startswith("req_")
    assert answer.headers["connection"] == "close"
    assert c.closed_by_server()


def test_slow_head_closed_by_its_deadline(tmp_path: Path) -> None:
    gw = gateway(tmp_path, header_timeout_s=0.5, keepalive_s=0.3)
    try:
        with Client(gw.port, timeout=10) as c:  # on a new connection
            answer, took = trickle(c, b"POST /v1/chat/completions HTTP/1.1\r\nhost: gw\r\n"
                                   + b"x-pad: " + b"a" * 400 + b"\r\n\r\n")
            assert_timed_out(answer, c)
            assert took < 5
        with Client(gw.port, timeout=10) as c:  # a later request on a kept-alive one
            c.send(request("GET", "/health"))
            assert c.answer().status == 200
            answer, _ = trickle(c, b"GET /health HTTP/1.1\r\nx-pad: " + b"a" * 400 + b"\r\n\r\n")
            assert_timed_out(answer, c)
        with Client(gw.port, timeout=10) as c:  # one that never sends a byte
            t0 = time.monotonic()
            assert c.closed_by_server()
            assert time.monotonic() - t0 < 5
    finally:
        gw.stop()


def test_slow_body_closed_by_its_deadline(tmp_path: Path) -> None:
    gw = gateway(tmp_path, body_timeout_s=0.5, body_min_rate=100, keepalive_s=0.3)
    try:
        key = gw.create_key("default")
        body = orjson.dumps({"model": MODEL, "max_tokens": 2,
                             "messages": [{"role": "user", "content": "hi"}]})
        body = b" " * 3000 + body  # JSON allows the padding
        head = request("POST", "/v1/chat/completions", b"",
                       headers={"authorization": f"Bearer {key}",
                                "content-length": str(len(body))})
        with Client(gw.port, timeout=10) as c:  # 20 bytes a second, under the minimum
            c.send(head)
            answer, took = trickle(c, body)
            assert_timed_out(answer, c)
            assert took < 5
        with Client(gw.port, timeout=10) as c:  # faster than the minimum: served, though
            c.send(head)                          # it takes longer than body_timeout_s
            t0 = time.monotonic()
            for i in range(0, len(body), 300):  # a client's real pace is what is tested:
                c.send(body[i:i + 300])           # ~4 KB/s against a 500 B/s minimum
                time.sleep(0.07)
            assert time.monotonic() - t0 > 0.5
            assert c.answer().status == 200
    finally:
        gw.stop()


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[GatewayThread]:
    gw = gateway(tmp_path, max_connections_per_address=3, max_connections=5)
    yield gw
    gw.stop()


def health(port: int, source: str) -> int:
    with Client(port, timeout=10, source=source) as c:
        c.send(request("GET", "/health"))
        return c.answer().status


def assert_refused(c: Client) -> None:
    c.send(request("GET", "/health"))
    answer = c.answer()
    assert answer.status == 503, answer.body
    assert answer.json()["error"]["code"] == "too_many_connections"
    assert answer.headers["retry-after"] == "1"
    assert answer.headers["x-request-id"].startswith("req_")
    assert c.closed_by_server()


def test_connections_capped_per_address(capped: GatewayThread) -> None:
    held = [Client(capped.port, timeout=10) for _ in range(3)]  # 127.0.0.1's share
    try:
        for c in held:  # each is served, and holds its connection open
            c.send(request("GET", "/health"))
            assert c.answer().status == 200
        with Client(capped.port, timeout=10) as extra:
            assert_refused(extra)
        assert health(capped.port, "127.0.0.2") == 200  # another address is served
        held[0].send(request("GET", "/health"))  # and the connections held still are
        assert held[0].answer().status == 200
        held.pop().close()
        deadline = time.monotonic() + 10  # the closed one's place is free again
        while health_or_refused(capped.port, "127.0.0.1") != 200:
            assert time.monotonic() < deadline
    finally:
        for c in held:
            c.close()


def health_or_refused(port: int, source: str) -> int:
    try:
        return health(port, source)
    except ConnectionError:
        return 0


def test_connections_capped_in_total(capped: GatewayThread) -> None:
    held = [Client(capped.port, timeout=10, source=f"127.0.0.{2 + i % 2}") for i in range(5)]
    try:
        for c in held:
            c.send(request("GET", "/health"))
            assert c.answer().status == 200
        with Client(capped.port, timeout=10, source="127.0.0.4") as extra:
            assert_refused(extra)
        held[-1].send(request("GET", "/health"))  # /health answers on a held connection
        assert held[-1].answer().status == 200
    finally:
        for c in held:
            c.close()


def listening_sockets() -> set[int]:
    """Inodes of this process's listening TCP sockets."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(int(target[8:-1]))
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":  # LISTEN
                listening.add(int(f[9]))
    return mine & listening


def test_only_the_front_listens(tmp_path: Path) -> None:
    """The application behind the front is reached over socket pairs: no port of its
    own where a slow client would meet none of the front's deadlines and caps (the
    only other listener is the metrics listener, on loopback, serving /metrics alone)."""
    before = listening_sockets()
    gw = gateway(tmp_path)
    try:
        assert health(gw.port, "127.0.0.1") == 200  # relayed to the application
        metrics = 1 if gw.gateway.config.observe.metrics.listen is not None else 0
        assert len(listening_sockets() - before) == 1 + metrics
    finally:
        gw.stop()


def test_serve_raises_the_open_file_limit() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard <= 300:
        pytest.skip("the hard open-file limit leaves nothing to raise")
    code = (
        "import resource\n"
        "from tokenplane.api.front.limits import FrontLimits, raise_nofile\n"
        "_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (300, hard))\n"
        "assert FrontLimits().connection_cap() == 64\n"
        "now = raise_nofile()\n"
        "assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == now > 300\n"
        "assert FrontLimits().connection_cap() > 64\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_refused_connection_when_no_answer_fits(tmp_path: Path) -> None:
    """Over a cap with too many 503s already under way, a connection is dropped
    unread rather than held (a flood of refused connections holds no descriptors)."""
    gw = gateway(tmp_path, max_connections_per_address=1)
    try:
        assert gw.server is not None and gw.server.front is not None
        front = gw.server.front
        with Client(gw.port, timeout=10) as first:
            first.send(request("GET", "/health"))
            assert first.answer().status == 200
            front.refusing = 10**6  # as if that many refusals were lingering
            try:
                with Client(gw.port, timeout=10) as extra:
                    extra.send(request("GET", "/health"))
                    with pytest.raises((ConnectionError, socket.timeout)):
                        extra.answer()
            finally:
                front.refusing = 0
    finally:
        gw.stop()


def test_config_check_names_bad_server_limits(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tokenplane.cli.main import build_cli

    f = tmp_path / "c.yaml"
    f.write_text("server:\n  header_timeout_s: 0\n  body_min_rate: fast\n"
                 "  max_connections: 0\n  max_connections_per_address: -1\n"
                 "models: [{alias: m, backends: [{type: sim}]}]\n")
    result = CliRunner().invoke(build_cli(), ["config", "check", str(f)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    for field in ("header_timeout_s", "body_min_rate", "max_connections",
                  "max_connections_per_address"):
        assert any(line.startswith(f"server.{field}: ") for line in lines), (field, lines)
