"""An Anthropic Messages request body, checked and turned into the canonical chat body
(the shape of an OpenAI Chat Completions body) the gateway's stages work on.

Anthropic-only details ride along under ``x_anthropic`` (on the body, a message, a
content part or a tool) so an Anthropic backend gets them back (``backend.py``);
:func:`strip_extensions` takes them off for any other backend.

Top-level fields with no chat equivalent: the Anthropic fields listed in
:data:`CARRIED` are kept verbatim in the body's ``x_anthropic.fields`` (an Anthropic
backend gets them back, others never see them); any other unknown field is a 400, as
Anthropic's own API answers. The gateway's own ``tokenplane`` object and the
``tokenplane_*`` keys of ``metadata`` pass through.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tokenplane.dialects.anthropic.checks import (
    bad,
    cache_control,
    is_int,
    is_number,
    need_dict,
    need_list,
    need_str,
)
from tokenplane.dialects.anthropic.extension import EXT, strip_extensions
from tokenplane.dialects.anthropic.request_content import chat_messages, system_message
from tokenplane.errors import invalid

__all__ = ["CARRIED", "looks_like_messages", "reasoning_effort", "strip_extensions",
           "to_chat"]

CARRIED = frozenset({
    "service_tier", "container", "mcp_servers", "context_management", "output_config",
    "inference_geo", "speed", "cache_control", "diagnostics",
})
_MAPPED = frozenset({
    "model", "max_tokens", "messages", "system", "temperature", "top_p", "top_k",
    "stop_sequences", "stream", "metadata", "tools", "tool_choice", "thinking", "tokenplane",
})
_CHAT_ONLY_FIELDS = ("max_completion_tokens", "n", "response_format", "stream_options")
# (a "system" message inside messages is Anthropic's too: per-turn instructions)
_CHAT_ONLY_ROLES = frozenset({"tool", "developer"})
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_MESSAGES_BLOCKS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})


def _chat_completions_shape(body: dict[str, Any]) -> str | None:
    """Why ``body`` looks like a Chat Completions request (None when it does not)."""
    for f in _CHAT_ONLY_FIELDS:
        if f in body:
            return f
    messages = body.get("messages")
    if isinstance(messages, list):
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                continue
            if _named(m.get("role"), _CHAT_ONLY_ROLES):
                return f"messages[{i}].role"
            if m.get("role") == "system" and "max_tokens" not in body:
                return f"messages[{i}].role"  # a chat body: Messages requires max_tokens
            if "tool_calls" in m:
                return f"messages[{i}].tool_calls"
    return None


def end_user(user_id: str) -> str:
    """The end user ``metadata.user_id`` names. Claude Code sends a JSON object
    (``device_id``, ``account_uuid``, ``session_id``): its account, else its device."""
    if user_id.startswith("{"):
        try:
            obj = json.loads(user_id)
        except ValueError:
            return user_id[:256]
        if isinstance(obj, dict):
            for k in ("account_uuid", "user_id", "device_id"):
                v = obj.get(k)
                if isinstance(v, str) and v:
                    return v[:256]
    return user_id[:256]


def _named(value: Any, names: frozenset[str]) -> bool:
    """``value`` is one of ``names`` (a client's list or object is not hashable)."""
    return isinstance(value, str) and value in names


def looks_like_messages(body: Any) -> bool:
    """Whether a body sent to /v1/chat/completions looks like an Anthropic Messages
    request: a top-level ``system``, a tool_use / tool_result / thinking block, or
    ``max_tokens`` with ``stop_sequences``."""
    if not isinstance(body, dict):
        return False
    if "system" in body or ("max_tokens" in body and "stop_sequences" in body):
        return True
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(
                isinstance(b, dict) and _named(b.get("type"), _MESSAGES_BLOCKS) for b in content):
            return True
    return False


def reasoning_effort(budget_tokens: int) -> str:
    """The chat ``reasoning_effort`` nearest a thinking budget."""
    if budget_tokens < 4096:
        return "low"
    return "medium" if budget_tokens < 16384 else "high"


def _unit(body: dict[str, Any], key: str) -> float | None:
    v = body.get(key)
    if v is None:
        return None
    if not is_number(v) or not 0 <= v <= 1:
        raise bad(key, "Input should be a number between 0 and 1")
    return float(v) if isinstance(v, float) else v


def _tools(tools: Any) -> list[dict[str, Any]]:
    out = []
    names: set[str] = set()
    for i, t in enumerate(need_list(tools, "tools")):
        path = f"tools[{i}]"
        t = need_dict(t, path)
        kind = t.get("type")
        if kind not in (None, "custom"):
            raise invalid(f"{path}.type: server tools ('{kind}') are not supported here; "
                          "only custom tools (name, description, input_schema) are",
                          param=f"{path}.type", code="unsupported_tool")
        name = need_str(t, "name", path)
        if not _TOOL_NAME.match(name):
            raise bad(f"{path}.name", "String should match pattern '^[a-zA-Z0-9_-]{1,128}$'")
        if name in names:
            raise bad(f"{path}.name", f"tool names must be unique ('{name}' is repeated)")
        names.add(name)
        schema = need_dict(t.get("input_schema"), f"{path}.input_schema")
        fn: dict[str, Any] = {"name": name}
        if t.get("description") is not None:
            fn["description"] = need_str(t, "description", path)
        fn["parameters"] = schema
        tool: dict[str, Any] = {"type": "function", "function": fn}
        cc = cache_control(t, path)
        if cc is not None:
            tool[EXT] = {"cache_control": cc}
        out.append(tool)
    return out


def _tool_choice(tc: Any, chat: dict[str, Any]) -> None:
    tc = need_dict(tc, "tool_choice")
    kind = tc.get("type")
    if kind == "auto":
        chat["tool_choice"] = "auto"
    elif kind == "any":
        chat["tool_choice"] = "required"
    elif kind == "none":
        chat["tool_choice"] = "none"
    elif kind == "tool":
        chat["tool_choice"] = {"type": "function",
                               "function": {"name": need_str(tc, "name", "tool_choice")}}
    else:
        raise bad("tool_choice.type", "Input should be 'auto', 'any', 'tool' or 'none'")
    dp = tc.get("disable_parallel_tool_use")
    if dp not in (None, True, False):
        raise bad("tool_choice.disable_parallel_tool_use", "Input should be a boolean")
    if dp and kind != "none":
        chat["parallel_tool_calls"] = False


def _thinking(th: Any, max_tokens: int, chat: dict[str, Any]) -> None:
    th = need_dict(th, "thinking")
    kind = th.get("type")
    if kind == "enabled":
        budget = th.get("budget_tokens")
        if not is_int(budget):
            raise bad("thinking.budget_tokens", "Input should be an integer")
        if budget < 1024:
            raise bad("thinking.budget_tokens", "must be at least 1024")
        if budget >= max_tokens:
            raise bad("thinking.budget_tokens", f"must be less than max_tokens ({max_tokens})")
        chat["reasoning_effort"] = reasoning_effort(budget)
    elif kind == "adaptive":
        chat["reasoning_effort"] = "medium"
    elif kind != "disabled":
        raise bad("thinking.type", "Input should be 'enabled', 'adaptive' or 'disabled'")


def _metadata(meta: Any, chat: dict[str, Any]) -> None:
    meta = need_dict(meta, "metadata")
    rest: dict[str, Any] = {}
    for k, v in meta.items():
        if k == "user_id":
            if v is not None and not isinstance(v, str):
                raise bad("metadata.user_id", "Input should be a string")
            if v:
                chat["user"] = end_user(v)
        elif k.startswith("tokenplane_"):
            rest[k] = v  # the gateway's own (sessions), checked by its stage
        else:
            raise bad(f"metadata.{k}", "Extra inputs are not permitted")
    if rest:
        chat["metadata"] = rest


def _checked_basics(body: dict[str, Any]) -> tuple[str, int, list[Any]]:
    why = _chat_completions_shape(body)
    if why is not None:
        raise invalid(f"This looks like an OpenAI Chat Completions request ({why}); send it "
                      "to /v1/chat/completions, or send an Anthropic Messages body here.",
                      param=why, code="wrong_api")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model", "Field required" if model is None else "Input should be a string")
    max_tokens = body.get("max_tokens")
    if not is_int(max_tokens) or max_tokens < 1:
        raise bad("max_tokens", "Field required" if max_tokens is None
                  else "Input should be a positive integer")
    messages = need_list(body.get("messages"), "messages")
    if not messages:
        raise bad("messages", "at least one message is required")
    for k in body:
        if k not in _MAPPED and k not in CARRIED:
            raise bad(k, "Extra inputs are not permitted")
    return model, max_tokens, messages


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The canonical chat body of a Messages request; a 400 naming the field when the
    request is not a valid one (or looks like a Chat Completions request)."""
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.")
    model, max_tokens, messages = _checked_basics(body)
    out: list[dict[str, Any]] = []
    if body.get("system") is not None:
        sm = system_message(body["system"])
        if sm is not None:
            out.append(sm)
    out.extend(chat_messages(messages))
    chat: dict[str, Any] = {"model": model, "messages": out, "max_tokens": max_tokens}
    x: dict[str, Any] = {}
    for key in ("temperature", "top_p"):
        v = _unit(body, key)
        if v is not None:
            chat[key] = v
    top_k = body.get("top_k")
    if top_k is not None:
        if not is_int(top_k) or top_k < 0:
            raise bad("top_k", "Input should be an integer >= 0")
        chat["top_k"] = top_k
    stops = body.get("stop_sequences")
    if stops is not None:
        for i, s in enumerate(need_list(stops, "stop_sequences")):
            if not isinstance(s, str):
                raise bad(f"stop_sequences[{i}]", "Input should be a string")
        if stops:
            chat["stop"] = list(stops)
    stream = body.get("stream")
    if stream is not None:
        if not isinstance(stream, bool):
            raise bad("stream", "Input should be a boolean")
        chat["stream"] = stream
        if stream:
            chat["stream_options"] = {"include_usage": True}
    if body.get("metadata") is not None:
        _metadata(body["metadata"], chat)
    if body.get("tools") is not None:
        tools = _tools(body["tools"])
        if tools:
            chat["tools"] = tools
    if body.get("tool_choice") is not None:
        _tool_choice(body["tool_choice"], chat)
    if body.get("thinking") is not None:
        _thinking(body["thinking"], max_tokens, chat)
        x["thinking"] = body["thinking"]
    if isinstance(body.get("tokenplane"), dict):
        chat["tokenplane"] = body["tokenplane"]
    elif body.get("tokenplane") is not None:
        raise bad("tokenplane", "Input should be an object")
    carried = {k: v for k, v in body.items() if k in CARRIED}
    if carried:
        x["fields"] = carried
    if x:
        chat[EXT] = x
    return chat
