"""Validation of OpenAI-shaped request bodies, with messages that say what to fix.

The checks every generating kind shares live here (:func:`check_common`); each endpoint
kind's own checks live with its operation (``operations/chat.py`` ...)."""

from __future__ import annotations

from typing import Any

from tokenplane.errors import GatewayError, invalid

_NUMBER = (int, float)


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(v), type(v).__name__)


# (field, accepted types, what to say, lowest, highest): after the model, checked in
# this order, every type before any range; only the fields a body has are looked at
_FIELDS: tuple[tuple[str, tuple[type, ...], str, float | None, float | None], ...] = (
    ("stream", (bool,), "a boolean", None, None),
    ("stream_options", (dict,), "an object", None, None),
    ("user", (str,), "a string", None, None),
    ("max_tokens", (int,), "an integer", 1, None),
    ("max_completion_tokens", (int,), "an integer", 1, None),
    ("n", (int,), "an integer", 1, 128),
    ("seed", (int,), "an integer", None, None),
    ("temperature", _NUMBER, "a number", 0, 2),
    ("top_p", _NUMBER, "a number", 0, 1),
    ("presence_penalty", _NUMBER, "a number", -2, 2),
    ("frequency_penalty", _NUMBER, "a number", -2, 2),
)


def check_type(name: str, v: Any, kinds: tuple[type, ...], label: str) -> None:
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise invalid(
            f"'{name}' must be {label}, got {type_name(v)}", param=name, code="invalid_type"
        )


def _check_range(name: str, v: Any, lo: float, hi: float | None) -> None:
    if v < lo or (hi is not None and v > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise invalid(f"'{name}' must be {bound}, got {v}", param=name, code="invalid_value")


def check_common(body: dict[str, Any]) -> None:
    """The model, then the sampling and streaming fields any generating kind may carry."""
    if "model" not in body:
        raise invalid("you must provide a model parameter", param="model", code="missing_required")
    model = body["model"]
    if model is not None:
        check_type("model", model, (str,), "a string")
    if not model:
        raise invalid("'model' must not be empty", param="model", code="invalid_value")
    present = [(f, body[f[0]]) for f in _FIELDS if f[0] in body and body[f[0]] is not None]
    for (name, kinds, label, _, _), v in present:
        check_type(name, v, kinds, label)
    for (name, _, _, lo, hi), v in present:
        if lo is not None:
            _check_range(name, v, lo, hi)
    so = body.get("stream_options")
    if so is not None and not body.get("stream"):
        raise invalid(
            "'stream_options' is only allowed when 'stream' is true",
            param="stream_options", code="invalid_value",
        )
    if isinstance(so, dict) and "include_usage" in so and not isinstance(so["include_usage"], bool):
        raise invalid("'stream_options.include_usage' must be a boolean",
                      param="stream_options.include_usage", code="invalid_type")
    stop = body.get("stop")
    if stop is not None and not (
        isinstance(stop, str) or (isinstance(stop, list) and all(isinstance(s, str) for s in stop))
    ):
        raise invalid("'stop' must be a string or an array of strings", param="stop",
                      code="invalid_type")


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
