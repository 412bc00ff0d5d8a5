"""``/v1/completions``: a text prompt (or token ids) in, text out.

``prompt`` is one prompt (a string, or an array of token ids) or a batch (an array of
strings, or an array of token-id arrays; up to :data:`MAX_PROMPTS`), as OpenAI's API
takes it: each prompt is answered ``n`` times, choice ``prompt_index * n + i``, and the
answer's usage sums them. The gateway counts the batch as one request whose prompt
tokens are the sum (source ``user``), each prompt must fit the context window, and the
output is reserved for every prompt."""

from __future__ import annotations

from typing import Any

from tokenplane.errors import GatewayError, invalid
from tokenplane.operations.base import Operation, Segment
from tokenplane.operations.fields import Obj
from tokenplane.operations.prefix import text_segments
from tokenplane.operations.schemas import completion_body
from tokenplane.operations.validate import check_body, check_common
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.ids import check_token_ids
from tokenplane.tokens.prompt_batch import MAX_CHOICES, MAX_PROMPTS, prompt_batch, prompt_list
from tokenplane.tokens.prompt_parts import PartCounter


class Completions(Operation):
    __slots__ = ()

    path = "/v1/completions"
    name = "text_completion"
    cap_fields = ("max_completion_tokens", "max_tokens")  # both checked, as for chat
    content_field = "prompt"
    chunk_object = "text_completion"
    cacheable = True

    def validate(self, body: dict[str, Any]) -> None:
        validate_completion(body)

    def body_spec(self) -> Obj:
        return BODY

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        return counter.prompt(body["prompt"])

    def prompts(self, body: dict[str, Any]) -> int:
        batch = prompt_batch(body.get("prompt"))
        return 1 if batch is None else len(batch)

    def prefix_segments(self, body: dict[str, Any]) -> list[Segment]:
        prompt = body.get("prompt")
        batch = prompt_batch(prompt)
        if batch is None or len(batch) == 1:
            return text_segments(prompt if batch is None else batch[0])
        # each prompt sliced on its own, in order: a later request that repeats the
        # first prompt (or shares its prefix) shares its leading blocks
        return [seg for p in batch for seg in text_segments(p)]

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        return {"index": 0, "text": "", "logprobs": None, "finish_reason": finish_reason}

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        return {"index": index, "text": text, "finish_reason": None}


COMPLETIONS = Completions()


BODY = completion_body()


def validate_completion(body: dict[str, Any]) -> None:
    check_batch(body.get("prompt"), body.get("n"))
    check_body(BODY, body)
    check_common(body)
    p = body["prompt"]
    if isinstance(p, list):
        items = prompt_list(p)
        for i, item in enumerate(items):
            if isinstance(item, list):  # a batch names the prompt that holds the bad id
                check_token_ids(item, "prompt" if len(items) == 1 else f"prompt[{i}]")


def check_batch(prompt: Any, n: Any) -> None:
    """A batch of prompts, before the field specs (whose messages would name one item):
    not empty, one type throughout (strings, or token-id arrays), at most
    :data:`MAX_PROMPTS` prompts and :data:`MAX_CHOICES` choices (prompts x ``n``)."""
    if not isinstance(prompt, list):
        return
    if not prompt:
        raise invalid("'prompt' must not be empty: send a string, an array of strings, an "
                      "array of token ids or an array of token-id arrays", param="prompt",
                      code="invalid_value")
    first = type(prompt[0])
    if first is str or first is list:
        for i, item in enumerate(prompt):
            if type(item) is not first:
                raise _mixed(i, "a string" if first is str else "an array of token ids")
            if not item and first is list:
                raise invalid(f"'prompt[{i}]' must not be empty: a prompt of token ids "
                              "holds at least one", param=f"prompt[{i}]",
                              code="invalid_value")
        count = len(prompt)
        if count > MAX_PROMPTS:
            raise invalid(f"'prompt' holds {count} prompts; at most {MAX_PROMPTS} are "
                          "accepted in one request", param="prompt", code="invalid_value")
        choices = n if isinstance(n, int) and not isinstance(n, bool) else 1
        if count * choices > MAX_CHOICES:
            raise invalid(f"{count} prompts x n={choices} ask for {count * choices} "
                          f"choices; at most {MAX_CHOICES} are accepted in one request",
                          param="n", code="invalid_value")
        return
    for i, item in enumerate(prompt):
        if isinstance(item, str | list):
            raise _mixed(i, "a token id")


def _mixed(index: int, want: str) -> GatewayError:
    return invalid(f"'prompt[{index}]' must be {want}, as the items before it: the prompt "
                   "is one string, an array of token ids, or a batch of all strings or all "
                   "arrays of token ids (mixed types)", param=f"prompt[{index}]",
                   code="invalid_type")
