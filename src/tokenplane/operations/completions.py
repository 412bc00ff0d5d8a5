"""``/v1/completions``: a text prompt (or token ids) in, text out."""

from __future__ import annotations

from typing import Any

from tokenplane.errors import invalid
from tokenplane.operations.base import Operation, Segment
from tokenplane.operations.fields import Obj
from tokenplane.operations.prefix import text_segments
from tokenplane.operations.schemas import completion_body
from tokenplane.operations.validate import check_body, check_common
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.ids import check_token_ids
from tokenplane.tokens.prompt_parts import PartCounter


class Completions(Operation):
    __slots__ = ()

    path = "/v1/completions"
    name = "text_completion"
    cap_fields = ("max_completion_tokens", "max_tokens")  # both checked, as for chat
    content_field = "prompt"
    chunk_object = "text_completion"

    def validate(self, body: dict[str, Any]) -> None:
        validate_completion(body)

    def body_spec(self) -> Obj:
        return BODY

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        return counter.prompt(body["prompt"])

    def prefix_segments(self, body: dict[str, Any]) -> list[Segment]:
        return text_segments(body.get("prompt"))

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        return {"index": 0, "text": "", "logprobs": None, "finish_reason": finish_reason}

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        return {"index": index, "text": text, "finish_reason": None}


COMPLETIONS = Completions()


BODY = completion_body()


def validate_completion(body: dict[str, Any]) -> None:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) > 1 and isinstance(p[0], str):
        raise invalid("batched prompts are not supported; send one prompt per request",
                      param="prompt", code="unsupported_value")
    check_body(BODY, body)
    check_common(body)
    if isinstance(p, list) and not isinstance(p[0], str):
        check_token_ids(p, "prompt")
