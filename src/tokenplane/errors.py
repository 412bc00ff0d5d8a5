"""The error a request can end with, below every package.

Policies and services raise a :class:`GatewayError` (or one of their own domain
subclasses: ``admission.errors``, ``governance.errors``); whatever speaks the wire
(the gateway's front and aiohttp app, the simulated engine's server, a stream's
error event) renders it with :func:`envelope` as OpenAI's error envelope. This
module imports nothing of tokenplane, so any layer may raise without depending on
the API layer.
"""

from __future__ import annotations

from typing import Any

import orjson

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    502: "upstream_error",
    503: "service_unavailable_error",
    504: "timeout_error",
}


class GatewayError(Exception):
    """A failure with a status (HTTP's numbers), a message, and OpenAI's ``type``,
    ``param`` and ``code``; ``headers`` travel with the answer (``retry-after``...)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        type_: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.type = type_ or ERROR_TYPES.get(status, "invalid_request_error")
        self.headers = dict(headers or {})


def invalid(message: str, *, param: str | None = None, code: str | None = None) -> GatewayError:
    """A 400 for a client mistake."""
    return GatewayError(400, message, param=param, code=code or "invalid_request")


def envelope(err: GatewayError) -> dict[str, Any]:
    """OpenAI's ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": err.message, "type": err.type, "param": err.param,
                      "code": err.code}}


def error_body(err: GatewayError) -> bytes:
    return orjson.dumps(envelope(err))
