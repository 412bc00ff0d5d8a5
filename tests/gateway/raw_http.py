"""A blocking HTTP/1.1 client on a bare socket, for tests of the front's wire
behaviour: what is sent is exactly the bytes given; answers are parsed with httptools
one after another (pipelining, 100 Continue, answers ended by the close)."""

from __future__ import annotations

import socket
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import httptools
import orjson


@dataclass
class Answer:
    status: int = 0
    version: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    chunks: int = 0  # chunk headers seen (a chunked body)
    pieces: list[bytes] = field(default_factory=list)  # body as it arrived

    def json(self) -> Any:
        return orjson.loads(self.body)


def request(method: str, path: str, body: bytes = b"", *, headers: dict[str, str] | None = None,
            version: str = "1.1") -> bytes:
    """One request with ``content-length`` (unless headers say otherwise)."""
    h = {"host": "gw", **(headers or {})}
    if body and "transfer-encoding" not in h:
        h.setdefault("content-length", str(len(body)))
    lines = "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return f"{method} {path} HTTP/{version}\r\n{lines}\r\n".encode() + body


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


class Client:
    def __init__(self, port: int, *, rcvbuf: int | None = None, timeout: float = 30,
                 source: str | None = None) -> None:
        """``source``: the client's own address (127.0.0.2 is another client of the
        loopback on Linux)."""
        self.sock = socket.socket()
        if rcvbuf is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if source is not None:
            self.sock.bind((source, 0))
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        self._parser = httptools.HttpResponseParser(self)
        self._cur: Answer | None = None
        self._done: deque[Answer] = deque()
        self.eof = False

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._cur = Answer()

    def on_header(self, name: bytes, value: bytes) -> None:
        assert self._cur is not None
        self._cur.headers[name.decode().lower()] = value.decode()

    def on_headers_complete(self) -> None:
        assert self._cur is not None
        self._cur.status = self._parser.get_status_code()
        self._cur.version = self._parser.get_http_version()

    def on_body(self, body: bytes) -> None:
        assert self._cur is not None
        self._cur.body += body
        self._cur.pieces.append(body)

    def on_chunk_header(self) -> None:
        assert self._cur is not None
        self._cur.chunks += 1

    def on_message_complete(self) -> None:
        assert self._cur is not None
        self._done.append(self._cur)
        self._cur = None

    def _recv(self) -> bool:
        data = self.sock.recv(1 << 16)
        if not data:
            self.eof = True
            if self._cur is not None and self._cur.status:  # a body ended by the close
                self._done.append(self._cur)
                self._cur = None
            return False
        self._parser.feed_data(data)
        return True

    def answer(self) -> Answer:
        """The next whole answer (a 100 Continue counts as one)."""
        while not self._done:
            if not self._recv():
                if self._done:
                    break
                raise ConnectionError("the server closed the connection before answering")
        return self._done.popleft()

    def first_piece(self) -> Answer:
        """Reads until the next answer's head and some body have arrived."""
        while self._cur is None or not self._cur.pieces:
            if self._done:
                return self._done[0]
            if not self._recv():
                raise ConnectionError("closed")
        return self._cur

    def closed_by_server(self) -> bool:
        """True once the server ends the connection (after any answers left)."""
        try:
            while self._recv():
                pass
        except (ConnectionResetError, TimeoutError):
            return False
        return True
