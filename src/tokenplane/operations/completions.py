"""``/v1/completions``: a text prompt (or token ids) in, text out."""

from __future__ import annotations

from typing import Any

from tokenplane.errors import invalid
from tokenplane.operations.base import Operation, Segment
from tokenplane.operations.prefix import text_segments
from tokenplane.operations.validate import check_common
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

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        return counter.prompt(body["prompt"])

    def prefix_segments(self, body: dict[str, Any]) -> list[Segment]:
        return text_segments(body.get("prompt"))

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        return {"index": 0, "text": "", "logprobs": None, "finish_reason": finish_reason}

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        return {"index": index, "text": text, "finish_reason": None}


COMPLETIONS = Completions()


def validate_completion(body: dict[str, Any]) -> None:
    check_common(body)
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
    if isinstance(p, list) and not isinstance(p[0], str):
        check_token_ids(p, "prompt")
