"""``/v1/embeddings``: inputs in, vectors out (no output tokens, no prefix to reuse)."""

from __future__ import annotations

from typing import Any

from tokenplane.errors import invalid
from tokenplane.operations.base import Operation
from tokenplane.operations.validate import check_type
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.ids import check_token_ids
from tokenplane.tokens.prompt_parts import PartCounter


class Embeddings(Operation):
    __slots__ = ()

    path = "/v1/embeddings"
    name = "embeddings"
    generates = False
    content_field = "input"
    chunk_object = "list"

    def validate(self, body: dict[str, Any]) -> None:
        validate_embeddings(body)

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        return counter.inputs(body["input"])

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        return {}  # never streamed

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        return {}


EMBEDDINGS = Embeddings()


def validate_embeddings(body: dict[str, Any]) -> None:
    if "model" not in body:
        raise invalid("you must provide a model parameter", param="model", code="missing_required")
    for name in ("model", "user"):
        if body.get(name) is not None:
            check_type(name, body[name], (str,), "a string")
    if "input" not in body:
        raise invalid("'input' is a required property", param="input", code="missing_required")
    inp = body["input"]
    if not (isinstance(inp, str) or (isinstance(inp, list) and inp)):
        raise invalid("'input' must be a string or a non-empty array", param="input",
                      code="invalid_type")
    if isinstance(inp, list):
        for item in inp:
            if isinstance(item, list):
                check_token_ids(item, "input")
            elif not isinstance(item, str):
                check_token_ids([item], "input")
