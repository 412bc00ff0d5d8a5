"""A request's usage as one canonical value, read from and written to each dialect.

The canonical ``input`` is every prompt token the upstream processed, cached reads and
cache writes included (OpenAI's ``prompt_tokens``); Anthropic's ``input_tokens``
excludes both, so :meth:`Usage.from_anthropic` adds them back and
:meth:`Usage.to_anthropic` takes them out again. ``output`` includes ``reasoning``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


def _int(d: Any, *path: str) -> int | None:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return int(d) if isinstance(d, int) and not isinstance(d, bool) else None


@dataclass(frozen=True, slots=True)
class Usage:
    input: int = 0  # every prompt token processed, cache reads and writes included
    output: int = 0  # every generated token, reasoning included
    cached: int = 0  # of input: read from a prompt cache
    cache_write_5m: int = 0  # of input: written to a 5-minute prompt cache
    cache_write_1h: int = 0  # of input: written to a 1-hour prompt cache
    reasoning: int = 0  # of output: reasoning ("thinking") tokens

    @property
    def cache_write(self) -> int:
        return self.cache_write_5m + self.cache_write_1h

    @property
    def uncached_input(self) -> int:
        """Input neither read from nor written to a cache (Anthropic's ``input_tokens``)."""
        return max(0, self.input - self.cached - self.cache_write)

    @staticmethod
    def read(d: Any, partial: bool = False) -> Usage | None:
        """The usage in either dialect's fields (OpenAI's ``prompt_tokens`` /
        ``completion_tokens``, Anthropic's ``input_tokens`` / ``output_tokens`` and cache
        fields, or OpenAI Responses' ``input_tokens`` with its details); None when ``d``
        reports no prompt count (``partial``: when it reports no count at all)."""
        if not isinstance(d, dict):
            return None
        if _int(d, "prompt_tokens") is not None or (partial and "completion_tokens" in d):
            return Usage.from_openai(d)
        if _int(d, "input_tokens") is None and not (partial and "output_tokens" in d):
            return None
        if "input_tokens_details" in d or "output_tokens_details" in d:
            return Usage.from_responses(d)
        return Usage.from_anthropic(d)

    @staticmethod
    def from_openai(d: dict[str, Any]) -> Usage:
        w5 = _int(d, "prompt_tokens_details", "cache_write_5m_tokens") or 0
        w1 = _int(d, "prompt_tokens_details", "cache_write_1h_tokens") or 0
        return Usage(
            input=_int(d, "prompt_tokens") or 0,
            output=_int(d, "completion_tokens") or 0,
            cached=_int(d, "prompt_tokens_details", "cached_tokens") or 0,
            cache_write_5m=w5, cache_write_1h=w1,
            reasoning=_int(d, "completion_tokens_details", "reasoning_tokens") or 0,
        )

    @staticmethod
    def from_responses(d: dict[str, Any]) -> Usage:
        """OpenAI Responses' ``input_tokens`` (cached included) and its details."""
        return Usage(
            input=_int(d, "input_tokens") or 0,
            output=_int(d, "output_tokens") or 0,
            cached=_int(d, "input_tokens_details", "cached_tokens") or 0,
            reasoning=_int(d, "output_tokens_details", "reasoning_tokens") or 0,
        )

    @staticmethod
    def from_anthropic(d: dict[str, Any]) -> Usage:
        read = _int(d, "cache_read_input_tokens") or 0
        created = _int(d, "cache_creation_input_tokens") or 0
        w1 = _int(d, "cache_creation", "ephemeral_1h_input_tokens") or 0
        w5 = _int(d, "cache_creation", "ephemeral_5m_input_tokens")
        if w5 is None:  # no split given: every write is a 5-minute one
            w5 = max(0, created - w1)
        return Usage(
            input=(_int(d, "input_tokens") or 0) + read + w5 + w1,
            output=_int(d, "output_tokens") or 0,
            cached=read, cache_write_5m=w5, cache_write_1h=w1,
            reasoning=_int(d, "output_tokens_details", "reasoning_tokens") or 0,
        )

    def to_openai(self) -> dict[str, Any]:
        details: dict[str, int] = {"cached_tokens": self.cached}
        if self.cache_write:
            details["cache_write_5m_tokens"] = self.cache_write_5m
            details["cache_write_1h_tokens"] = self.cache_write_1h
        out: dict[str, Any] = {
            "prompt_tokens": self.input, "completion_tokens": self.output,
            "total_tokens": self.input + self.output, "prompt_tokens_details": details,
        }
        if self.reasoning:
            out["completion_tokens_details"] = {"reasoning_tokens": self.reasoning}
        return out

    def to_anthropic(self) -> dict[str, Any]:
        return {
            "input_tokens": self.uncached_input,
            "cache_creation_input_tokens": self.cache_write,
            "cache_read_input_tokens": self.cached,
            "cache_creation": {"ephemeral_5m_input_tokens": self.cache_write_5m,
                               "ephemeral_1h_input_tokens": self.cache_write_1h},
            "output_tokens": self.output,
        }
