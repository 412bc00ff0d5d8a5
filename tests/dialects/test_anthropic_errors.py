"""Anthropic's error envelope, types, stream error event and upstream errors."""

from __future__ import annotations

import orjson
import pytest

from tokenplane.dialects.anthropic.errors import (
    error_body,
    error_event,
    error_type,
    from_upstream,
    wire_status,
)
from tokenplane.errors import GatewayError, invalid

anthropic = pytest.importorskip("anthropic")


@pytest.mark.parametrize(("status", "kind"), [
    (400, "invalid_request_error"), (405, "invalid_request_error"),
    (409, "invalid_request_error"), (415, "invalid_request_error"),
    (422, "invalid_request_error"), (401, "authentication_error"), (402, "billing_error"),
    (403, "permission_error"), (404, "not_found_error"), (413, "request_too_large"),
    (429, "rate_limit_error"), (500, "api_error"), (502, "overloaded_error"),
    (503, "overloaded_error"), (529, "overloaded_error"), (504, "api_error"),
    (418, "api_error"), (507, "api_error"),
])
def test_error_type(status: int, kind: str) -> None:
    assert error_type(status) == kind


def test_wire_status() -> None:
    assert wire_status(503) == 529
    assert [wire_status(s) for s in (400, 429, 500, 502, 504)] == [400, 429, 500, 502, 504]


def test_body_and_event() -> None:
    err = invalid("bad thing", param="max_tokens")
    doc = orjson.loads(error_body(err, "req_1"))
    assert doc == {"type": "error", "error": {"type": "invalid_request_error",
                                              "message": "bad thing"}, "request_id": "req_1"}
    anthropic.types.ErrorResponse.model_validate(doc)
    frame = error_event(GatewayError(503, "busy"), "req_2")
    assert frame.startswith(b"event: error\ndata: ") and frame.endswith(b"\n\n")
    data = orjson.loads(frame[len(b"event: error\ndata: "):-2])
    assert data["error"] == {"type": "overloaded_error", "message": "busy"}
    assert b"\n" not in frame[len(b"event: error\ndata: "):-2]


def test_from_upstream() -> None:
    body = orjson.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                    "message": "Overloaded"},
                         "request_id": "req_x"})
    e = from_upstream(529, body)
    assert (e.status, e.message, e.type) == (529, "Overloaded", "overloaded_error")
    e = from_upstream(400, b'{"type":"error","error":{"type":"invalid_request_error",'
                           b'"message":"max_tokens: Field required"}}')
    assert e.status == 400 and e.message == "max_tokens: Field required"
    assert e.type == "invalid_request_error"
    e = from_upstream(502, b"<html>bad gateway</html>")
    assert e.status == 502 and "bad gateway" in e.message and e.type == "overloaded_error"
    e = from_upstream(500, b"")
    assert e.status == 500 and e.type == "api_error" and e.message
    e = from_upstream(401, b'{"message": "no key"}')
    assert e.message == "no key" and e.type == "authentication_error"
