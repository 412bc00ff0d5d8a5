"""Validation of OpenAI-shaped request bodies, with messages that say what to fix."""

from __future__ import annotations

from typing import Any

from tokenplane.errors import GatewayError, invalid

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_NUMBER = (int, float)


def _type_name(v: Any) -> str:
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


def _check_type(name: str, v: Any, kinds: tuple[type, ...], label: str) -> None:
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise invalid(
            f"'{name}' must be {label}, got {_type_name(v)}", param=name, code="invalid_type"
        )


def _check_range(name: str, v: Any, lo: float, hi: float | None) -> None:
    if v < lo or (hi is not None and v > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise invalid(f"'{name}' must be {bound}, got {v}", param=name, code="invalid_value")


def _common(body: dict[str, Any]) -> None:
    if "model" not in body:
        raise invalid("you must provide a model parameter", param="model", code="missing_required")
    model = body["model"]
    if model is not None:
        _check_type("model", model, (str,), "a string")
    if not model:
        raise invalid("'model' must not be empty", param="model", code="invalid_value")
    present = [(f, body[f[0]]) for f in _FIELDS if f[0] in body and body[f[0]] is not None]
    for (name, kinds, label, _, _), v in present:
        _check_type(name, v, kinds, label)
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


def _content(msg: dict[str, Any], i: int) -> None:
    content = msg.get("content")
    role = msg["role"]
    param = f"messages[{i}].content"
    if content is None:
        if role == "assistant" and (msg.get("tool_calls") or msg.get("function_call")):
            return
        raise invalid(f"'{param}' is required for role '{role}'", param=param,
                      code="missing_required")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise invalid(f"'{param}' must be a string or an array of content parts, got "
                      f"{_type_name(content)}", param=param, code="invalid_type")
    for j, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise invalid(f"'{param}[{j}]' must be an object with a 'type'",
                          param=f"{param}[{j}]", code="invalid_type")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise invalid(f"'{param}[{j}].text' must be a string",
                          param=f"{param}[{j}].text", code="invalid_type")


def validate_chat(body: dict[str, Any]) -> None:
    _common(body)
    if "messages" not in body:
        raise invalid("'messages' is a required property", param="messages",
                      code="missing_required")
    msgs = body["messages"]
    if not isinstance(msgs, list):
        raise invalid(f"'messages' must be an array of message objects, got {_type_name(msgs)}",
                      param="messages", code="invalid_type")
    if not msgs:
        raise invalid("'messages' must contain at least one message", param="messages",
                      code="invalid_value")
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict):
            raise invalid(f"'messages[{i}]' must be an object, got {_type_name(msg)}",
                          param=f"messages[{i}]", code="invalid_type")
        role = msg.get("role")
        if role not in ROLES:
            raise invalid(
                f"'messages[{i}].role' must be one of {sorted(ROLES)}, got {role!r}",
                param=f"messages[{i}].role", code="invalid_value",
            )
        _content(msg, i)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise invalid("'tools' must be an array", param="tools", code="invalid_type")
        for i, tool in enumerate(tools):
            fn = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise invalid(f"'tools[{i}]' must be {{'type': 'function', 'function': "
                              "{'name': ...}}", param=f"tools[{i}]", code="invalid_type")


def validate_completion(body: dict[str, Any]) -> None:
    _common(body)
    if "prompt" not in body:
        raise invalid("'prompt' is a required property", param="prompt", code="missing_required")
    p = body["prompt"]
    ok = isinstance(p, str) or (
        isinstance(p, list) and p and (
            all(isinstance(x, str) for x in p)
            or all(isinstance(x, int) and not isinstance(x, bool) for x in p)
        )
    )
    if not ok:
        raise invalid("'prompt' must be a string, an array of strings or an array of token ids",
                      param="prompt", code="invalid_type")
    if isinstance(p, list) and len(p) > 1 and isinstance(p[0], str):
        raise invalid("batched prompts are not supported; send one prompt per request",
                      param="prompt", code="unsupported_value")


def validate_embeddings(body: dict[str, Any]) -> None:
    if "model" not in body:
        raise invalid("you must provide a model parameter", param="model", code="missing_required")
    for name in ("model", "user"):
        if body.get(name) is not None:
            _check_type(name, body[name], (str,), "a string")
    if "input" not in body:
        raise invalid("'input' is a required property", param="input", code="missing_required")
    inp = body["input"]
    if not (isinstance(inp, str) or (isinstance(inp, list) and inp)):
        raise invalid("'input' must be a string or a non-empty array", param="input",
                      code="invalid_type")


def requested_max_tokens(body: dict[str, Any]) -> int | None:
    v = body.get("max_completion_tokens")
    if v is None:
        v = body.get("max_tokens")
    return int(v) if v is not None else None


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
        raise invalid(f"the request body must be a JSON object, got {_type_name(body)}",
                      code="invalid_json")
    return body


def not_found(path: str) -> GatewayError:
    return GatewayError(404, f"Unknown route: {path}", code="unknown_route")
