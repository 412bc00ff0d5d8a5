"""JSON-RPC 2.0 messages as MCP carries them: parsing a client's message into a
request or a notification, the error codes, and the answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# server errors (-32000 .. -32099), the gateway's own
DENIED = -32003  # a policy refused the call; ``data.reason`` says why
RATE_LIMITED = -32029  # ``data.retry_after_s``
UPSTREAM_TIMEOUT = -32010
UPSTREAM_UNAVAILABLE = -32011
RESULT_TOO_LARGE = -32012
MESSAGE_TOO_LARGE = -32013

Id = str | int | None


class RpcError(Exception):
    """An error answer for the request being handled."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None,
                 status: int = 200) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status  # the HTTP status it goes out with

    def body(self, rid: Id) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return {"jsonrpc": "2.0", "id": rid, "error": err}


@dataclass(frozen=True, slots=True)
class Message:
    """A client's request (``id`` set) or notification (``notification``)."""

    method: str
    params: dict[str, Any]
    id: Id
    notification: bool


def parse(raw: bytes) -> Message | dict[str, Any]:
    """The message in ``raw``; a response from the client (to a server request the
    gateway never sends) comes back as its dict. Raises RpcError (status 400)."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"Parse error: the body is not JSON ({exc})",
                       status=400) from None
    if isinstance(data, list):
        raise RpcError(INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not "
                       "supported (send one message per POST)", status=400)
    if not isinstance(data, dict):
        raise RpcError(INVALID_REQUEST, "Invalid Request: a JSON-RPC message is an object",
                       status=400)
    if data.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"',
                       status=400)
    rid = data.get("id")
    if "method" not in data:
        if ("result" in data or "error" in data) and "id" in data:
            return data
        raise RpcError(INVALID_REQUEST, 'Invalid Request: no "method"', status=400)
    method = data["method"]
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "method" must be a string',
                       status=400)
    if "id" in data and (isinstance(rid, bool) or not isinstance(rid, (str, int))):
        raise RpcError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an '
                       "integer", status=400)
    params = data.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, 'Invalid params: "params" must be an object',
                       status=400)
    return Message(method, params, rid, "id" not in data)


def result(rid: Id, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": value}


def string_param(msg: Message, name: str) -> str:
    value = msg.params.get(name)
    if not isinstance(value, str) or not value:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {name!r} must be a non-empty string")
    return value
