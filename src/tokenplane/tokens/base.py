"""The tokenizer interface every stage uses (gateway, engine, simulation)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Tokenizer(Protocol):
    """Encodes text to token ids. Implementations wrap tiktoken, Qwen, HF json..."""

    name: str

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def count(self, text: str) -> int: ...
