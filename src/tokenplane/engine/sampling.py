"""The sampling and output-shape fields the simulated engine honours beyond length:
``n``, ``seed``, ``temperature``, ``stop``, ``logprobs`` / ``top_logprobs``,
``response_format`` and tools. :func:`parse_sampling` checks them (OpenAI's 400s, the
same rules as the gateway: ``operations/structured.py``) and returns ``None`` for a
plain request, which keeps the engine's fast path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenplane.errors import invalid
from tokenplane.operations.structured import check_structured

MAX_N = 128
MAX_STOP = 4
MAX_TOP_LOGPROBS = 20  # chat; completions' ``logprobs`` goes to 5
MAX_TEXT_LOGPROBS = 5
_KEYS = frozenset({"n", "seed", "stop", "logprobs", "top_logprobs", "response_format",
                   "tools", "tool_choice", "parallel_tool_calls"})
INT64 = 1 << 63


@dataclass(frozen=True)
class Tool:
    name: str
    parameters: Any  # a JSON Schema (checked) or None


@dataclass(frozen=True)
class Sampling:
    """What shapes a request's choices (the plain path has none of it)."""

    n: int = 1
    seed: int | None = None
    greedy: bool = False  # temperature 0: every choice is the same text
    stop: tuple[str, ...] = ()
    top_logprobs: int | None = None  # None: no logprobs; else alternatives per token
    json_mode: str | None = None  # None, "object" or "schema"
    schema: Any = None
    tools: tuple[Tool, ...] = ()
    tool_choice: str | None = None  # None (no tools), "none", "auto", "required", "name"
    named_tool: str | None = None
    parallel_tool_calls: bool = True


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _stop(v: Any) -> tuple[str, ...]:
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,) if v else ()
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise invalid("'stop' must be a string or an array of up to 4 strings", param="stop",
                      code="invalid_type")
    if len(v) > MAX_STOP:
        raise invalid(f"'stop' allows at most {MAX_STOP} sequences, got {len(v)}",
                      param="stop", code="invalid_value")
    return tuple(s for s in v if s)


def _logprobs(body: dict[str, Any], chat: bool) -> int | None:
    lp = body.get("logprobs")
    top = body.get("top_logprobs")
    if not chat:
        if lp is None:
            return None
        if not _is_int(lp) or not 0 <= lp <= MAX_TEXT_LOGPROBS:
            raise invalid(f"'logprobs' must be an integer between 0 and {MAX_TEXT_LOGPROBS}",
                          param="logprobs", code="invalid_value")
        return int(lp)
    if lp is not None and not isinstance(lp, bool):
        raise invalid("'logprobs' must be a boolean", param="logprobs", code="invalid_type")
    if top is not None:
        if not _is_int(top) or not 0 <= top <= MAX_TOP_LOGPROBS:
            raise invalid(f"'top_logprobs' must be an integer between 0 and {MAX_TOP_LOGPROBS}",
                          param="top_logprobs", code="invalid_value")
        if lp is not True:
            raise invalid("'top_logprobs' needs 'logprobs': true", param="top_logprobs",
                          code="invalid_value")
    return (int(top) if top is not None else 0) if lp else None


def _response_format(v: Any) -> tuple[str | None, Any]:
    if v is None:
        return None, None
    if not isinstance(v, dict):
        raise invalid("'response_format' must be an object", param="response_format",
                      code="invalid_type")
    t = v.get("type")
    if t == "text":
        return None, None
    if t == "json_object":
        return "object", None
    if t == "json_schema":
        js = v.get("json_schema")
        if not isinstance(js, dict) or not isinstance(js.get("name"), str) or not js["name"]:
            raise invalid("'response_format.json_schema' must be an object with a 'name'",
                          param="response_format.json_schema", code="invalid_value")
        schema = js.get("schema")
        return "schema", schema if schema is not None else {}
    raise invalid("'response_format.type' must be one of 'text', 'json_object', "
                  "'json_schema'", param="response_format.type", code="invalid_value")


def _tools(v: Any) -> tuple[Tool, ...]:
    if v is None:
        return ()
    if not isinstance(v, list):
        raise invalid("'tools' must be an array of tools", param="tools", code="invalid_type")
    out = []
    for i, t in enumerate(v):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(fn, dict):
            raise invalid(f"'tools[{i}]' must be {{'type': 'function', 'function': {{...}}}}",
                          param=f"tools[{i}]", code="invalid_value")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise invalid(f"'tools[{i}].function.name' must be a non-empty string",
                          param=f"tools[{i}].function.name", code="invalid_value")
        out.append(Tool(name, fn.get("parameters")))
    return tuple(out)


def _tool_choice(v: Any, tools: tuple[Tool, ...]) -> tuple[str | None, str | None]:
    if v is None:
        return ("auto" if tools else None), None
    if v in ("none", "auto", "required"):
        return str(v), None
    if isinstance(v, dict) and v.get("type") == "function":
        fn = v.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return "name", fn["name"]
    raise invalid("'tool_choice' must be 'none', 'auto', 'required' or "
                  "{'type': 'function', 'function': {'name': ...}}", param="tool_choice",
                  code="invalid_value")


def parse_sampling(body: dict[str, Any], chat: bool) -> Sampling | None:
    """The request's :class:`Sampling`, or None when it asks for nothing beyond length
    (a temperature alone changes nothing: the plain path is already deterministic)."""
    if _KEYS.isdisjoint(body):
        return None
    n = body.get("n")
    if n is None:
        n = 1
    if not _is_int(n) or not 1 <= n <= MAX_N:
        raise invalid(f"'n' must be an integer between 1 and {MAX_N}", param="n",
                      code="invalid_value")
    seed = body.get("seed")
    if seed is not None and (not _is_int(seed) or not -INT64 <= seed < INT64):
        raise invalid("'seed' must be a 64-bit integer", param="seed", code="invalid_value")
    stop = _stop(body.get("stop"))
    top = _logprobs(body, chat)
    json_mode, schema = _response_format(body.get("response_format")) if chat else (None, None)
    tools = _tools(body.get("tools")) if chat else ()
    choice, named = _tool_choice(body.get("tool_choice"), tools) if chat else (None, None)
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise invalid("'parallel_tool_calls' must be a boolean", param="parallel_tool_calls",
                      code="invalid_type")
    if chat:
        check_structured(body)
    if (n == 1 and seed is None and not stop and top is None and json_mode is None
            and not tools):
        return None
    temperature = body.get("temperature")
    return Sampling(
        n=n, seed=seed, greedy=temperature == 0, stop=stop, top_logprobs=top,
        json_mode=json_mode, schema=schema, tools=tools, tool_choice=choice,
        named_tool=named, parallel_tool_calls=parallel is not False,
    )
