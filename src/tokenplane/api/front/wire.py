"""The HTTP/1.1 front's requests as parsed, and the head of its answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol

from multidict import CIMultiDict

from tokenplane.errors import GatewayError

_REASONS = {s.value: s.phrase for s in HTTPStatus}
_FRAMING = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


def bad_request(reason: str) -> GatewayError:
    return GatewayError(400, f"Malformed HTTP request: {reason}", code="bad_http_request")


def head_too_large(limit: int) -> GatewayError:
    return GatewayError(431, f"The request line and headers exceed {limit} bytes.",
                        code="headers_too_large")


def request_timeout(part: str, seconds: float) -> GatewayError:
    return GatewayError(408, f"The {part} did not arrive within {seconds:.3g} s.",
                        code="request_timeout")


@dataclass(slots=True)
class FrontRequest:
    method: str
    target: str  # as sent: path and query
    path: str  # without the query
    version: str  # "1.1" or "1.0"
    headers: CIMultiDict[str]
    body: bytes = b""
    keep_alive: bool = True  # after the answer; the answer's head says so
    error: GatewayError | None = None  # the front refuses the request itself (400, 413)


def blank_request() -> FrontRequest:
    """A request refused before its head was read."""
    return FrontRequest("", "", "", "1.1", CIMultiDict())


class Closing(Protocol):
    """Whether the front that accepted a connection is shutting down (no keep-alive)."""

    closing: bool


def head(req: FrontRequest, status: int, headers: Mapping[str, str], framing: str) -> bytes:
    """Status line and headers; ``framing`` is the body's framing header line(s)."""
    version = "1.0" if req.version == "1.0" else "1.1"
    parts = [f"HTTP/{version} {status} {_REASONS.get(status, 'Unknown')}\r\n"]
    for name, value in headers.items():
        if name.lower() not in _FRAMING:
            parts.append(f"{name}: {value}\r\n")
    parts.append(framing)
    if not req.keep_alive:
        parts.append("connection: close\r\n")
    elif version == "1.0":
        parts.append("connection: keep-alive\r\n")
    parts.append("\r\n")
    return "".join(parts).encode()
