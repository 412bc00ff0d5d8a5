"""``/v1/messages``: Anthropic's Messages API, served on the canonical chat path.

The body is checked and turned into the canonical request by the dialect's request
translator (``dialects/anthropic/request.py``); from there every stage treats it as
it treats a chat request (counting by source, guards, admission, cache, routing),
and the answer is rendered back by the dialect (``dialects/anthropic/edge.py``).
Its ledger name is ``messages``.
"""

from __future__ import annotations

from typing import Any

from tokenplane.dialects.anthropic.edge import ANTHROPIC
from tokenplane.dialects.anthropic.request import to_chat
from tokenplane.dialects.extensions import strip_extensions
from tokenplane.operations.base import Segment
from tokenplane.operations.chat import ChatCompletions
from tokenplane.operations.fields import Obj
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.prompt_parts import PartCounter


class AnthropicMessages(ChatCompletions):
    __slots__ = ()

    path = "/v1/messages"
    name = "messages"
    upstream_path = "/v1/chat/completions"  # the canonical request is a chat one
    dialect = ANTHROPIC

    def canonical(self, body: dict[str, Any]) -> dict[str, Any]:
        return to_chat(body)

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        # what the backend is sent: an extension (a tool's cache_control) is not prompt
        return super().count_prompt(counter, strip_extensions(body))

    def prefix_segments(self, body: dict[str, Any]) -> list[Segment]:
        return super().prefix_segments(strip_extensions(body))

    def validate(self, body: dict[str, Any]) -> None:
        to_chat(body)

    def body_spec(self) -> Obj | None:  # type: ignore[override]
        return None  # checked by the dialect's translator; published as an object


MESSAGES = AnthropicMessages()
