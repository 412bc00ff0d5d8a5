"""``/v1/chat/completions``: a list of messages (and tools) in, a message out."""

from __future__ import annotations

from typing import Any

from tokenplane.errors import invalid
from tokenplane.operations.base import Operation, Segment
from tokenplane.operations.prefix import message_segments
from tokenplane.operations.validate import check_common, type_name
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.prompt_parts import PartCounter

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})


class ChatCompletions(Operation):
    __slots__ = ()

    path = "/v1/chat/completions"
    name = "chat"
    cap_fields = ("max_completion_tokens", "max_tokens")
    content_field = "messages"
    messages_field = "messages"
    tools = True
    chat_choices = True
    chunk_object = "chat.completion.chunk"

    def validate(self, body: dict[str, Any]) -> None:
        validate_chat(body)

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        return counter.messages(body["messages"], body.get("tools"))

    def prefix_segments(self, body: dict[str, Any]) -> list[Segment]:
        return message_segments(body.get("messages"), body.get("tools"))

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        return {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason}

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        return {"index": index, "delta": {"content": text}, "finish_reason": None}


CHAT = ChatCompletions()


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
                      f"{type_name(content)}", param=param, code="invalid_type")
    for j, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise invalid(f"'{param}[{j}]' must be an object with a 'type'",
                          param=f"{param}[{j}]", code="invalid_type")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise invalid(f"'{param}[{j}].text' must be a string",
                          param=f"{param}[{j}].text", code="invalid_type")


def _tool_calls(msg: dict[str, Any], i: int) -> None:
    calls = msg.get("tool_calls")
    if calls is None:
        return
    param = f"messages[{i}].tool_calls"
    if not isinstance(calls, list):
        raise invalid(f"'{param}' must be an array of tool call objects, got "
                      f"{type_name(calls)}", param=param, code="invalid_type")
    for j, call in enumerate(calls):
        if not isinstance(call, dict):
            raise invalid(f"'{param}[{j}]' must be an object, got {type_name(call)}",
                          param=param, code="invalid_type")
        if not isinstance(call.get("function", call), dict):
            raise invalid(f"'{param}[{j}].function' must be an object", param=param,
                          code="invalid_type")


def validate_chat(body: dict[str, Any]) -> None:
    check_common(body)
    if "messages" not in body:
        raise invalid("'messages' is a required property", param="messages",
                      code="missing_required")
    msgs = body["messages"]
    if not isinstance(msgs, list):
        raise invalid(f"'messages' must be an array of message objects, got {type_name(msgs)}",
                      param="messages", code="invalid_type")
    if not msgs:
        raise invalid("'messages' must contain at least one message", param="messages",
                      code="invalid_value")
    for i, msg in enumerate(msgs):
        if not isinstance(msg, dict):
            raise invalid(f"'messages[{i}]' must be an object, got {type_name(msg)}",
                          param=f"messages[{i}]", code="invalid_type")
        role = msg.get("role")
        if role not in ROLES:
            raise invalid(
                f"'messages[{i}].role' must be one of {sorted(ROLES)}, got {role!r}",
                param=f"messages[{i}].role", code="invalid_value",
            )
        _content(msg, i)
        _tool_calls(msg, i)
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise invalid("'tools' must be an array", param="tools", code="invalid_type")
        for i, tool in enumerate(tools):
            fn = tool.get("function") if isinstance(tool, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise invalid(f"'tools[{i}]' must be {{'type': 'function', 'function': "
                              "{'name': ...}}", param=f"tools[{i}]", code="invalid_type")
