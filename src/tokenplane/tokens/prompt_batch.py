"""A completions request's prompts: OpenAI's ``prompt`` is one prompt (a string, or an
array of token ids) or several (an array of strings, or an array of token-id arrays),
each answered ``n`` times, choice ``prompt_index * n + i``."""

from __future__ import annotations

from typing import Any

MAX_PROMPTS = 64  # prompts in one request (the choices, prompts x n, are capped too)
MAX_CHOICES = 128  # prompts x n: what one request may ask to generate


def prompt_batch(prompt: Any) -> list[Any] | None:
    """The prompts of a request that sends an array of them (strings, or token-id
    arrays), or None for one prompt (a string, or one array of token ids). A one-item
    array is a batch of one."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
        return prompt
    return None


def prompt_list(prompt: Any) -> list[Any]:
    """Every prompt of ``prompt`` as its own item (a string or a list of token ids)."""
    batch = prompt_batch(prompt)
    return batch if batch is not None else [prompt]
