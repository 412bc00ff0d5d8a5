"""Anthropic's error answers: the envelope ``{"type": "error", "error": {"type",
"message"}, "request_id"}``, its error types by status, the stream's ``error`` event,
and an Anthropic backend's error answer read back as a :class:`GatewayError`."""

from __future__ import annotations

from typing import Any

import orjson

from tokenplane.errors import GatewayError

_TYPES = {
    400: "invalid_request_error", 405: "invalid_request_error",
    409: "invalid_request_error", 415: "invalid_request_error",
    422: "invalid_request_error",
    401: "authentication_error", 402: "billing_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    500: "api_error", 502: "overloaded_error", 503: "overloaded_error",
    529: "overloaded_error", 504: "api_error",
}


def error_type(status: int) -> str:
    """Anthropic's ``error.type`` for an HTTP status."""
    return _TYPES.get(status, "api_error")


def wire_status(status: int) -> int:
    """The status Anthropic answers with: 529 for an overload (503), else the same."""
    return 529 if status == 503 else status


def envelope(err: GatewayError, request_id: str) -> dict[str, Any]:
    return {"type": "error",
            "error": {"type": error_type(err.status), "message": err.message},
            "request_id": request_id}


def error_body(err: GatewayError, request_id: str) -> bytes:
    return orjson.dumps(envelope(err, request_id))


def error_event(err: GatewayError, request_id: str) -> bytes:
    """The SSE ``event: error`` frame of a stream that fails after it started."""
    return b"event: error\ndata: " + error_body(err, request_id) + b"\n\n"


def from_upstream(status: int, body: bytes) -> GatewayError:
    """An Anthropic backend's error answer as a :class:`GatewayError` with the
    backend's status, message and error type."""
    message: str | None = None
    kind: str | None = None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if isinstance(doc, dict):
        e = doc.get("error")
        if isinstance(e, dict):
            m, t = e.get("message"), e.get("type")
            message = m if isinstance(m, str) else None
            kind = t if isinstance(t, str) and t else None
        elif isinstance(doc.get("message"), str):
            message = doc["message"]
    if message is None:
        text = body[:500].decode("utf-8", "replace").strip()
        message = f"The Anthropic backend answered {status}" + (f": {text}" if text else ".")
    return GatewayError(status, message, type_=kind or error_type(status), code=kind)
