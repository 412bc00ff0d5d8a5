"""The HTTP/1.1 client against real servers: aiohttp for well-formed answers, raw
asyncio servers for the malformed and the unusual."""

from __future__ import annotations

import asyncio
import datetime
import functools
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import uvloop
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tokenplane.upstream.http1_client import H1ConnectError, H1Connection, H1Error, H1Pool, Origin

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _serve(handler: Handler, ssl_ctx: ssl.SSLContext | None = None,
                 keepalive: float = 75.0) -> tuple[web.AppRunner, int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, keepalive_timeout=keepalive)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_ctx)
    await site.start()
    port = runner.addresses[0][1]
    return runner, int(port)


async def _raw_server(answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                       Awaitable[None]]) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, int(server.sockets[0].getsockname()[1])


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """Lets the loop run until ``cond()`` holds (fails after ``timeout`` seconds)."""
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0)


def _closed(conn: H1Connection) -> bool:
    return conn.transport is not None and conn.transport.is_closing()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


async def test_json_answers_reuse_one_connection() -> None:
    seen: list[tuple[str, str, bytes, str]] = []

    async def echo(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append((request.method, request.path, body, request.headers["x-request-id"]))
        return web.json_response({"n": len(seen)})

    runner, port = await _serve(echo)
    pool = H1Pool(f"http://127.0.0.1:{port}")
    try:
        for i in range(3):
            conn = await pool.request("POST", "/v1/chat/completions",
                                      {"x-request-id": f"r{i}"}, b'{"a":1}')
            status, headers = await conn.head()
            assert status == 200 and headers["content-type"].startswith("application/json")
            assert await conn.read_all() == b'{"n": %d}' % (i + 1)
            pool.release(conn)
        assert pool.opened == 1  # kept alive and reused
        assert seen == [("POST", "/v1/chat/completions", b'{"a":1}', f"r{i}") for i in range(3)]
    finally:
        pool.close()
        await runner.cleanup()


async def test_stream_arrives_in_pieces_and_the_connection_is_reused() -> None:
    gate = asyncio.Event()

    async def sse(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)  # chunked transfer encoding
        await resp.write(b"data: 1\n\n")
        await gate.wait()
        await resp.write(b"data: 2\n\n")
        await resp.write_eof()
        return resp

    runner, port = await _serve(sse)
    pool = H1Pool(f"http://127.0.0.1:{port}")
    try:
        conn = await pool.request("POST", "/s", {}, b"{}")
        assert (await conn.head())[0] == 200
        assert await conn.read_some() == b"data: 1\n\n"  # before the rest exists
        gate.set()
        rest = b""
        while chunk := await conn.read_some():
            rest += chunk
        assert rest == b"data: 2\n\n"
        assert conn.reusable
        pool.release(conn)
        gate.clear()
        conn2 = await pool.request("POST", "/s", {}, b"{}")
        assert conn2 is conn
        conn2.close()
    finally:
        pool.close()
        await runner.cleanup()


async def test_large_stream_with_back_pressure_loses_nothing() -> None:
    payload = bytes(range(256)) * 8192  # 2 MiB, far above the pause threshold

    async def big(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for i in range(0, len(payload), 65536):
            await resp.write(payload[i:i + 65536])
        await resp.write_eof()
        return resp

    runner, port = await _serve(big)
    pool = H1Pool(f"http://127.0.0.1:{port}")
    try:
        conn = await pool.request("POST", "/", {}, b"")
        await conn.head()
        await _until(lambda: conn._paused)  # nobody reads: the buffer fills and reading stops
        got = bytearray()
        while chunk := await conn.read_some():
            got += chunk
        assert bytes(got) == payload
    finally:
        pool.close()
        await runner.cleanup()


async def test_whole_body_above_the_pause_threshold() -> None:
    """A non-stream answer bigger than the back-pressure threshold (a large embeddings
    batch) is read whole: reading must not stay paused while nobody drains chunks."""
    payload = b"x" * (3 << 20)

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=payload)

    runner, port = await _serve(big)
    pool = H1Pool(f"http://127.0.0.1:{port}")
    try:
        conn = await pool.request("POST", "/", {}, b"")
        await conn.head()
        assert await asyncio.wait_for(conn.read_all(), 10) == payload
    finally:
        pool.close()
        await runner.cleanup()


async def test_abort_mid_stream_is_seen_by_the_server() -> None:
    left = asyncio.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        try:
            while True:
                await resp.write(b"data: x\n\n")
                await asyncio.sleep(0)
        except (ConnectionResetError, asyncio.CancelledError):
            left.set()
            raise

    runner, port = await _serve(endless)
    pool = H1Pool(f"http://127.0.0.1:{port}")
    try:
        conn = await pool.request("POST", "/", {}, b"")
        await conn.head()
        assert await conn.read_some()
        conn.close()
        await asyncio.wait_for(left.wait(), 5)
        assert not conn.reusable
    finally:
        pool.close()
        await runner.cleanup()


async def test_connection_close_and_close_delimited_bodies() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n"
                     b"until the end")
        await writer.drain()
        writer.close()

    server, port = await _raw_server(answer)
    pool = H1Pool(f"http://127.0.0.1:{port}")
    try:
        for expected_opened in (1, 2):
            conn = await pool.request("POST", "/", {}, b"x")
            assert (await conn.head())[0] == 200
            assert await conn.read_all() == b"until the end"
            assert not conn.reusable
            pool.release(conn)
            assert pool.opened == expected_opened  # never reused after connection: close
    finally:
        pool.close()
        server.close()
        await server.wait_closed()


async def test_idle_connection_closed_by_the_server_is_not_reused() -> None:
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    runner, port = await _serve(ok, keepalive=0.1)
    pool = H1Pool(f"http://127.0.0.1:{port}")
    try:
        for _ in range(2):
            conn = await pool.request("POST", "/", {}, b"")
            assert await conn.read_all() == b"ok"
            pool.release(conn)
            await _until(functools.partial(_closed, conn))  # the server's keep-alive ended
        assert pool.opened == 2
    finally:
        pool.close()
        await runner.cleanup()


@pytest.mark.parametrize("reply", [
    b"this is not http\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",  # then the server leaves
    b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 2\r\n\r\nzz",
])
async def test_broken_answers_fail_and_are_never_reused(reply: bytes) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(reply)
        await writer.drain()
        writer.close()

    server, port = await _raw_server(answer)
    pool = H1Pool(f"http://127.0.0.1:{port}")
    try:
        conn = await pool.request("POST", "/", {}, b"")
        with pytest.raises(H1Error):
            await conn.head()
            await conn.read_all()
        assert not conn.reusable
    finally:
        pool.close()
        server.close()
        await server.wait_closed()


async def test_refused_connection_and_bad_headers() -> None:
    server, port = await _raw_server(lambda r, w: asyncio.sleep(0))
    server.close()
    await server.wait_closed()
    pool = H1Pool(f"http://127.0.0.1:{port}")
    with pytest.raises(H1ConnectError):
        await pool.request("POST", "/", {}, b"")
    with pytest.raises(ValueError):
        await pool.request("POST", "/", {"x-evil": "a\r\nhost: other"}, b"")


def test_origin_parsing() -> None:
    o = Origin.parse("https://api.example.com/v1/")
    assert (o.scheme, o.host, o.port, o.prefix, o.host_header) == \
        ("https", "api.example.com", 443, "/v1", "api.example.com")
    assert Origin.parse("http://127.0.0.1:8000").host_header == "127.0.0.1:8000"
    assert Origin.parse("http://[::1]:81").host_header == "[::1]:81"
    with pytest.raises(ValueError):
        Origin.parse("ftp://x")


def _self_signed(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
            .sign(key, hashes.SHA256()))
    (tmp / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    client = ssl.create_default_context(cafile=str(tmp / "cert.pem"))
    return server, client


async def test_https_with_prefix(tmp_path: Path) -> None:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=f"{request.host} {request.path}")

    server_ctx, client_ctx = _self_signed(tmp_path)
    runner, port = await _serve(hello, ssl_ctx=server_ctx)
    pool = H1Pool(f"https://localhost:{port}/base", ssl_context=client_ctx)
    try:
        conn = await pool.request("POST", "/v1/x", {}, b"")
        assert await conn.read_all() == f"localhost:{port} /base/v1/x".encode()
        pool.release(conn)
        # an untrusted certificate is a connect failure, not an answer
        strict = H1Pool(f"https://localhost:{port}")
        with pytest.raises(H1ConnectError):
            await strict.request("POST", "/", {}, b"")
    finally:
        pool.close()
        await runner.cleanup()



def test_under_uvloop() -> None:
    """The gateway serves on uvloop, whose transports are not asyncio.Transport
    subclasses: the whole exchange must work there too."""

    async def scenario() -> None:
        async def sse(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b"data: 1\n\n")
            await resp.write_eof()
            return resp

        runner, port = await _serve(sse)
        pool = H1Pool(f"http://127.0.0.1:{port}")
        try:
            for _ in range(2):
                conn = await pool.request("POST", "/", {}, b"{}")
                assert (await conn.head())[0] == 200
                assert await conn.read_all() == b"data: 1\n\n"
                pool.release(conn)
            assert pool.opened == 1
        finally:
            pool.close()
            await runner.cleanup()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(scenario())
