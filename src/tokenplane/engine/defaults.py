"""Fallback tokenizer and prompt builder for running the simulated engine on its own.

The gateway injects the model's real chat template; these exist so that
``serve_replicas`` and the engine's tests work without it: the registry's offline
``cl100k_base`` encoding and a plain ``role: content`` chat rendering.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokenplane.errors import invalid
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.prompt_parts import PromptEncoder

PromptIds = PromptEncoder  # prompt parts -> ids (the engine kind picks the parts)


def default_tokenizer() -> Tokenizer:
    """cl100k_base (offline copy) from the tokenizer registry."""
    from tokenplane.tokens.registry import TokenizerRegistry

    return TokenizerRegistry().get("tiktoken:cl100k_base")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


class SimpleIds:
    """Chat as ``role: content`` lines, completions as they are."""

    __slots__ = ("tokenizer",)

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def messages(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[int]:
        lines = [
            f"{m.get('role', 'user')}: {_content_text(m.get('content'))}\n"
            for m in messages
            if isinstance(m, dict)
        ]
        return self.tokenizer.encode("".join(lines) + "assistant:")

    def prompt(self, prompt: Any) -> list[int]:
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt)
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return [int(t) for t in prompt]
        raise invalid("'prompt' must be a string or an array of token ids", param="prompt")


def simple_prompt_ids(tokenizer: Tokenizer) -> PromptIds:
    """The prompt ids of :class:`SimpleIds` (no chat template)."""
    return SimpleIds(tokenizer)
