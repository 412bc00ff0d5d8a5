"""OpenAI's error envelope and the exception that carries it to the edge."""

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


class ApiError(Exception):
    """A failure with an HTTP status and OpenAI's error envelope.

    Raise it anywhere on the request path; the HTTP face turns it into a response.
    """

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

    def envelope(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def body(self) -> bytes:
        return orjson.dumps(self.envelope())


def invalid(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    """A 400 for a client mistake."""
    return ApiError(400, message, param=param, code=code or "invalid_request")
