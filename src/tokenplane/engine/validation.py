"""Checks on OpenAI-shaped request bodies for the simulated engine (400s, never 500s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from tokenplane.engine.sampling import Sampling, parse_sampling
from tokenplane.errors import GatewayError, invalid
from tokenplane.tokens.ids import check_token_ids
from tokenplane.tokens.prompt_batch import prompt_batch

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})


class BodyCheck(Protocol):
    """An engine kind's own checks of its body (``engine/kinds.py``)."""

    name: str

    def check(self, body: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class GenParams:
    """What the service needs from a chat or completions body."""

    endpoint: str  # the kind's operation name ("chat", "text_completion")
    model: str | None
    stream: bool
    include_usage: bool
    max_tokens: int | None
    reasoning_effort: str | None
    sampling: Sampling | None = None  # None: a plain request (length only)


def parse_json_object(body: bytes) -> dict[str, Any]:
    if not body:
        raise invalid("request body is empty; send a JSON object")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise invalid("request body must be a JSON object")
    return data


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _optional_int(body: dict[str, Any], key: str, minimum: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not _is_int(value) or value < minimum:
        raise invalid(f"'{key}' must be an integer >= {minimum}", param=key)
    return int(value)


def _check_range(body: dict[str, Any], key: str, low: float, high: float) -> None:
    value = body.get(key)
    if value is None:
        return
    if not _is_number(value) or not low <= value <= high:
        raise invalid(f"'{key}' must be a number between {low} and {high}", param=key)


def check_messages(body: dict[str, Any]) -> None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("'messages' must be a non-empty array of message objects", param="messages")
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise invalid(f"messages[{i}] must be an object", param=f"messages[{i}]")
        role = msg.get("role")
        if role not in ROLES:
            raise invalid(
                f"messages[{i}].role must be one of {sorted(ROLES)}", param=f"messages[{i}].role"
            )
        content = msg.get("content")
        if content is not None and not isinstance(content, str | list):
            raise invalid(
                f"messages[{i}].content must be a string or an array of parts",
                param=f"messages[{i}].content",
            )


def check_prompt(prompt: Any) -> None:
    """A completions prompt: a string or token ids, or a batch of them (an array of
    strings, or of token-id arrays), as vLLM takes it."""
    batch = prompt_batch(prompt)
    if batch is None:
        _check_one(prompt)
        return
    first = type(batch[0])
    if any(type(p) is not first for p in batch):
        raise invalid("'prompt' must not mix strings and token-id arrays", param="prompt")
    for p in batch:
        _check_one(p)


def _check_one(prompt: Any) -> None:
    if isinstance(prompt, str):
        if not prompt:
            raise invalid("'prompt' must not be empty", param="prompt")
        return
    if isinstance(prompt, list) and prompt and all(_is_int(t) for t in prompt):
        check_token_ids(prompt, "prompt")
        return
    raise invalid(
        "'prompt' must be a non-empty string, a non-empty array of token ids or an array "
        "of either", param="prompt"
    )


def parse_generation(body: dict[str, Any], kind: BodyCheck) -> GenParams:
    """Validate a body of a generating kind (chat, completions): the kind's own
    checks, then the sampling and streaming fields they share."""
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise invalid("'model' must be a string", param="model")
    kind.check(body)
    max_tokens = _optional_int(body, "max_tokens", 1)
    max_completion = _optional_int(body, "max_completion_tokens", 1)
    if max_completion is not None:
        max_tokens = max_completion if max_tokens is None else min(max_tokens, max_completion)
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise invalid("'stream' must be a boolean", param="stream")
    include_usage = False
    options = body.get("stream_options")
    if options is not None:
        if not stream:
            raise invalid("'stream_options' is only allowed when 'stream' is true",
                          param="stream_options")
        if not isinstance(options, dict):
            raise invalid("'stream_options' must be an object", param="stream_options")
        usage = options.get("include_usage", False)
        if not isinstance(usage, bool):
            raise invalid("'stream_options.include_usage' must be a boolean",
                          param="stream_options.include_usage")
        include_usage = usage
    _check_range(body, "temperature", 0.0, 2.0)
    _check_range(body, "top_p", 0.0, 1.0)
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in EFFORTS:
        raise invalid(f"'reasoning_effort' must be one of {sorted(EFFORTS)}",
                      param="reasoning_effort")
    sampling = parse_sampling(body, kind.name == "chat")
    return GenParams(kind.name, model, stream, include_usage, max_tokens, effort, sampling)


def check_model(requested: str | None, served: str) -> None:
    """vLLM answers 404 for a model it does not serve."""
    if requested is not None and requested != served:
        raise GatewayError(404, f"The model `{requested}` does not exist.", code="model_not_found",
                           param="model")
