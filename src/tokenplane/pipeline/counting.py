"""Per-alias prompt counting: the gateway's counter and the simulated engine's ground
truth come from the same chat template, so a sim replica's ``usage`` and the
gateway's count agree exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokenplane.config.schema import ModelConfig
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.counter import ChatCounter, CountResult
from tokenplane.tokens.counts import TokenCounts
from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache
from tokenplane.tokens.templates import make_template

_FAMILY_BY_KIND = {"tiktoken": "openai", "qwen": "qwen", "deepseek": "deepseek", "hf": "chatml"}


def normalize_spec(spec: str) -> str:
    """``cl100k_base`` -> ``tiktoken:cl100k_base``; full specs pass unchanged."""
    if ":" in spec or spec == "deepseek":
        return spec
    if spec.endswith("_base") or spec in ("gpt2",):
        return f"tiktoken:{spec}"
    if spec.lower().startswith("qwen"):
        return f"qwen:{spec.lower()}"
    return spec


def family_for(model: ModelConfig, spec: str) -> str:
    if model.chat_template:
        return model.chat_template
    return _FAMILY_BY_KIND.get(spec.partition(":")[0], "chatml")


class ModelCounters:
    """One :class:`ChatCounter` per alias, sharing a registry and a segment cache."""

    def __init__(
        self, models: list[ModelConfig], registry: TokenizerRegistry | None = None,
        cache: SegmentCache | None = None,
    ) -> None:
        self.registry = registry or TokenizerRegistry()
        self.cache = cache or SegmentCache()
        self._by_alias: dict[str, ChatCounter] = {}
        for m in models:
            spec = normalize_spec(m.tokenizer)
            template = make_template(family_for(m, spec), self.registry.get(spec))
            self._by_alias[m.alias] = ChatCounter(template, self.cache)

    def counter(self, alias: str) -> ChatCounter:
        return self._by_alias[alias]

    def tokenizer(self, alias: str) -> Tokenizer:
        return self._by_alias[alias].template.tokenizer

    def count(self, model: ModelConfig, operation: str, body: dict[str, Any]) -> CountResult:
        c = self._by_alias[model.alias]
        if operation == "chat":
            return c.count(body["messages"], body.get("tools"))
        if operation == "text_completion":
            return c.count_prompt(body["prompt"])
        inp = body["input"]
        items = [inp] if isinstance(inp, str) else inp
        total = 0
        for item in items:
            if isinstance(item, str):
                total += c.count_text(item)
            elif isinstance(item, int):
                total += 1
            elif isinstance(item, list):
                total += len(item)
        return CountResult(TokenCounts(user=total))

    def count_text(self, model: ModelConfig, text: str) -> int:
        return self._by_alias[model.alias].count_text(text)

    def prompt_ids(self, alias: str) -> Callable[[dict[str, Any], str], list[int]]:
        """The engine's view: the full prompt ids of a request body."""
        template = self._by_alias[alias].template

        def ids(body: dict[str, Any], endpoint: str) -> list[int]:
            if endpoint == "chat":
                return template.encode(body["messages"], body.get("tools"))
            prompt = body["prompt"]
            if isinstance(prompt, str):
                return template.tokenizer.encode(prompt)
            out: list[int] = []
            for item in prompt:
                if isinstance(item, str):
                    out.extend(template.tokenizer.encode(item))
                elif isinstance(item, int):
                    out.append(item)
                else:
                    out.extend(item)
            return out

        return ids
