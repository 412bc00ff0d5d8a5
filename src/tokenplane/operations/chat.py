"""``/v1/chat/completions``: a list of messages (and tools) in, a message out."""

from __future__ import annotations

from typing import Any

from tokenplane.dialects.anthropic.request import looks_like_messages
from tokenplane.errors import GatewayError, invalid
from tokenplane.operations.base import Operation, Segment
from tokenplane.operations.fields import Obj
from tokenplane.operations.prefix import message_segments
from tokenplane.operations.schemas import chat_body
from tokenplane.operations.structured import check_structured
from tokenplane.operations.validate import check_body, check_common
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.prompt_parts import PartCounter


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
    cacheable = True

    def validate(self, body: dict[str, Any]) -> None:
        validate_chat(body)

    def body_spec(self) -> Obj:
        return BODY

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        return counter.messages(body["messages"], body.get("tools"))

    def prefix_segments(self, body: dict[str, Any]) -> list[Segment]:
        return message_segments(body.get("messages"), body.get("tools"))

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        return {"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish_reason}

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        return {"index": index, "delta": {"content": text}, "finish_reason": None}


CHAT = ChatCompletions()


BODY = chat_body()


def validate_chat(body: dict[str, Any]) -> None:
    if ("system" in body or "stop_sequences" in body) and looks_like_messages(body):
        raise _messages_body()
    try:
        _check_chat(body)
    except GatewayError:
        if looks_like_messages(body):  # say which API the body was written for
            raise _messages_body() from None
        raise


def _messages_body() -> GatewayError:
    return invalid("This looks like an Anthropic Messages request (a top-level 'system', "
                   "'stop_sequences' or tool_use / tool_result / thinking blocks); send it to "
                   "/v1/messages, or send a Chat Completions body here.",
                   param="messages", code="wrong_api")


def _check_chat(body: dict[str, Any]) -> None:
    check_body(BODY, body)
    check_common(body)
    for i, msg in enumerate(body["messages"]):
        if (msg.get("role") == "assistant" and msg.get("content") is None
                and not msg.get("tool_calls") and not msg.get("function_call")):
            param = f"messages[{i}].content"
            raise invalid(f"'{param}' is required for role 'assistant' unless 'tool_calls' "
                          "or 'function_call' is set", param=param, code="missing_required")
    if body.get("top_logprobs") is not None and body.get("logprobs") is not True:
        raise invalid("'top_logprobs' needs 'logprobs': true", param="top_logprobs",
                      code="invalid_value")
    if "tools" in body or "response_format" in body or "tool_choice" in body:
        check_structured(body)
