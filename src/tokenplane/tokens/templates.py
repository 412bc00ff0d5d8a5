"""Chat template families by name: openai, chatml, qwen, qwen3, deepseek, llama3."""

from __future__ import annotations

from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.messages import DEFAULT_IMAGE_TOKENS
from tokenplane.tokens.template_base import ChatTemplate
from tokenplane.tokens.template_chatml import ChatMLTemplate, Qwen3Template, QwenTemplate
from tokenplane.tokens.template_deepseek import DeepSeekTemplate
from tokenplane.tokens.template_llama3 import Llama3Template
from tokenplane.tokens.template_openai import OpenAITemplate

FAMILIES: dict[str, type[ChatTemplate]] = {
    "openai": OpenAITemplate,
    "chatml": ChatMLTemplate,
    "qwen": QwenTemplate,
    "qwen3": Qwen3Template,
    "deepseek": DeepSeekTemplate,
    "llama3": Llama3Template,
}


def make_template(
    family: str, tokenizer: Tokenizer, image_tokens: int = DEFAULT_IMAGE_TOKENS
) -> ChatTemplate:
    """The chat template of ``family`` over ``tokenizer``; ValueError for unknown families."""
    cls = FAMILIES.get(family)
    if cls is None:
        raise ValueError(f"unknown chat family {family!r}; known: {sorted(FAMILIES)}")
    return cls(tokenizer, image_tokens)
