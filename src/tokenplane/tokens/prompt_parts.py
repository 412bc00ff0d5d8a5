"""The parts a prompt is made of, counted (or encoded) without knowing its endpoint kind.

An endpoint kind (``tokenplane.operations``) picks the parts of its request body and
hands them to a :class:`PartCounter` (the gateway's count by source) or a
:class:`PromptEncoder` (the simulated engine's prompt ids): chat messages and tools, a
completion prompt, embedding inputs. Counting code never asks which kind it serves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from tokenplane.tokens.counter import CountResult


class PartCounter(Protocol):
    """Counts one alias's prompt parts (an exact counter or the estimator)."""

    def messages(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> CountResult: ...

    def prompt(self, prompt: Any) -> CountResult:
        """A completion prompt: a string, strings, token ids or lists of ids."""
        ...

    def inputs(self, value: Any) -> CountResult:
        """Embedding inputs: a string, or strings, token ids and lists of ids."""
        ...


class PromptKind(Protocol):
    """An endpoint kind as counting sees it: which parts of a body to count."""

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult: ...


class PromptEncoder(Protocol):
    """The full prompt ids of prompt parts (the simulated engine's ground truth)."""

    def messages(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[int]: ...

    def prompt(self, prompt: Any) -> list[int]: ...
