"""What every answer of the fuzzed gateway must be."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

ERROR_FIELDS = {"message", "type", "param", "code"}
MESSAGES_ERROR_TYPES = {"invalid_request_error", "authentication_error", "permission_error",
                        "not_found_error", "request_too_large", "rate_limit_error"}


def answer_ok(resp: httpx.Response, what: Any) -> dict[str, Any] | None:
    """No 5xx; an x-request-id; an error in OpenAI's envelope. Returns the error."""
    assert resp.status_code < 500, (what, resp.status_code, resp.text[:2000])
    assert resp.headers.get("x-request-id", "").startswith("req_"), (what, resp.headers)
    if resp.status_code < 400:
        return None
    assert resp.headers["content-type"].startswith("application/json"), (what, resp.headers)
    body = orjson.loads(resp.content)
    assert isinstance(body, dict) and set(body) == {"error"}, (what, resp.text[:2000])
    err: dict[str, Any] = body["error"]
    assert set(err) == ERROR_FIELDS, (what, err)
    assert isinstance(err["message"], str) and err["message"], (what, err)
    assert isinstance(err["type"], str) and err["type"], (what, err)
    assert "Traceback" not in resp.text, what
    return err


def messages_error_ok(resp: httpx.Response, what: Any) -> dict[str, Any] | None:
    """No 5xx; a request-id; an error in Anthropic's envelope. Returns the error."""
    assert resp.status_code < 500, (what, resp.status_code, resp.text[:2000])
    assert resp.headers.get("request-id", "").startswith("req_"), (what, resp.headers)
    if resp.status_code < 400:
        return None
    body = orjson.loads(resp.content)
    assert body.get("type") == "error", (what, resp.text[:2000])
    err: dict[str, Any] = body["error"]
    assert err["type"] in MESSAGES_ERROR_TYPES, (what, err)
    assert isinstance(err["message"], str) and err["message"], (what, err)
    assert "Traceback" not in resp.text, what
    return err
