"""``/v1/embeddings``: inputs in, vectors out (no output tokens, no prefix to reuse)."""

from __future__ import annotations

from typing import Any

from tokenplane.operations.base import Operation
from tokenplane.operations.fields import Obj
from tokenplane.operations.schemas import embedding_body
from tokenplane.operations.validate import check_body
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

    def body_spec(self) -> Obj:
        return BODY

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        return counter.inputs(body["input"])

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        return {}  # never streamed

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        return {}


EMBEDDINGS = Embeddings()


BODY = embedding_body()


def validate_embeddings(body: dict[str, Any]) -> None:
    check_body(BODY, body)
    inp = body["input"]
    if isinstance(inp, list) and not isinstance(inp[0], str):
        for item in inp:
            check_token_ids(item if isinstance(item, list) else [item], "input")
