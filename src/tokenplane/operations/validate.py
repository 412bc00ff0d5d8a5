"""Validation of OpenAI-shaped request bodies, with messages that say what to fix.

Each kind's body is one spec tree (``operations/schemas.py``, checked by
``operations/fields.py``); what a spec cannot say (a field allowed only with another)
is checked here (:func:`check_common`) or by the kind's own module. The content type
of a request is checked by :func:`check_content_type`."""

from __future__ import annotations

from typing import Any

from tokenplane.errors import GatewayError, invalid
from tokenplane.operations.fields import Bad, Obj, type_name

__all__ = ["check_body", "check_common", "check_content_type", "check_type",
           "not_found", "parse_json_object", "type_name"]


def check_type(name: str, v: Any, kinds: tuple[type, ...], label: str) -> None:
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise invalid(
            f"'{name}' must be {label}, got {type_name(v)}", param=name, code="invalid_type"
        )


def check_body(spec: Obj, body: dict[str, Any]) -> None:
    """Every field the spec knows, of its type and in its range; other fields pass."""
    try:
        spec.verify_fields(body)
    except Bad as bad:
        raise bad.error() from None


def check_common(body: dict[str, Any]) -> None:
    """Rules between the fields any generating kind may carry (after :func:`check_body`)."""
    if body.get("stream_options") is not None and not body.get("stream"):
        raise invalid(
            "'stream_options' is only allowed when 'stream' is true",
            param="stream_options", code="invalid_value",
        )


_JSON_TYPES = ("application/json", "text/json")
_CURL_DEFAULT = "application/x-www-form-urlencoded"


def check_content_type(value: str | None) -> None:
    """415 unless the body is declared JSON (``application/json``, ``application/*+json``,
    ``text/json``; a ``charset`` other than UTF-8 is refused too). A request with no
    ``Content-Type`` at all is read as JSON, as OpenAI's API does."""
    if value is None:
        return
    mime, _, params = value.partition(";")
    mime = mime.strip().lower()
    if mime in _JSON_TYPES or (mime.startswith("application/") and mime.endswith("+json")):
        charset = _charset(params)
        if charset is None or charset in ("utf-8", "utf8"):
            return
        raise unsupported_media_type(f"the charset {charset!r} is not supported; JSON bodies "
                                     "are UTF-8")
    shown = mime[:64] or "(empty)"
    if mime == _CURL_DEFAULT:  # curl -d sends this unless told otherwise
        raise unsupported_media_type(
            f"the Content-Type {shown!r} is not supported: it is what curl sends with -d "
            "unless told otherwise; send the JSON body with -H 'Content-Type: "
            "application/json' (or use --json, curl 7.82 and later)")
    raise unsupported_media_type(f"the Content-Type {shown!r} is not supported; send the "
                                 "body as JSON with 'Content-Type: application/json'")


def _charset(params: str) -> str | None:
    for p in params.split(";"):
        name, _, val = p.partition("=")
        if name.strip().lower() == "charset":
            return val.strip().strip('"').lower()
    return None


def unsupported_media_type(message: str) -> GatewayError:
    return GatewayError(415, message[:1].upper() + message[1:] + ".",
                        code="unsupported_media_type")


def parse_json_object(raw: bytes) -> dict[str, Any]:
    import orjson

    if not raw:
        raise invalid("the request body is empty; send a JSON object", code="invalid_json")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        msg = str(exc)
        if "utf-8" in msg.lower() or "surrogate" in msg.lower():
            raise invalid("the request body is not valid UTF-8", code="invalid_encoding") from None
        raise invalid(f"the request body is not valid JSON: {msg}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise invalid(f"the request body must be a JSON object, got {type_name(body)}",
                      code="invalid_json")
    return body


def not_found(path: str) -> GatewayError:
    return GatewayError(404, f"Unknown route: {path}", code="unknown_route")
