"""Fallback tokenizer and prompt builder for running the simulated engine on its own.

The gateway injects the model's real chat template; these exist so that
``serve_replicas`` and the engine's tests work without it: the registry's offline
``cl100k_base`` encoding and a plain ``role: content`` chat rendering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokenplane.errors import invalid
from tokenplane.tokens.base import Tokenizer

PromptIds = Callable[[dict[str, Any], str], list[int]]


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


def simple_prompt_ids(tokenizer: Tokenizer) -> PromptIds:
    """prompt_ids(body, endpoint): chat as ``role: content`` lines, completions as is."""

    def prompt_ids(body: dict[str, Any], endpoint: str) -> list[int]:
        if endpoint == "chat":
            lines = [
                f"{m.get('role', 'user')}: {_content_text(m.get('content'))}\n"
                for m in body.get("messages", [])
                if isinstance(m, dict)
            ]
            return tokenizer.encode("".join(lines) + "assistant:")
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return tokenizer.encode(prompt)
        if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            return [int(t) for t in prompt]
        raise invalid("'prompt' must be a string or an array of token ids", param="prompt")

    return prompt_ids
