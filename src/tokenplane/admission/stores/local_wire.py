"""The frames between the workers of one host and their counter server: a 4-byte
big-endian length, then an orjson body. Requests are ``[op, tenant, payload]``;
answers are the raw integer lists of :mod:`tokenplane.admission.book`, in order."""

from __future__ import annotations

from typing import Any

import orjson

HEAD = 4
MAX_FRAME = 64 * 1024 * 1024


def frame(obj: Any) -> bytes:
    body = orjson.dumps(obj)
    return len(body).to_bytes(HEAD, "big") + body


class FrameReader:
    """Splits a byte stream into decoded frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf
        buf += data
        out: list[Any] = []
        pos = 0
        while len(buf) - pos >= HEAD:
            n = int.from_bytes(buf[pos:pos + HEAD], "big")
            if n > MAX_FRAME:
                raise ValueError(f"admission frame of {n} bytes")
            if len(buf) - pos - HEAD < n:
                break
            out.append(orjson.loads(bytes(buf[pos + HEAD:pos + HEAD + n])))
            pos += HEAD + n
        if pos:
            del buf[:pos]
        return out
