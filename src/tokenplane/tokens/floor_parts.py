"""Prompt parts floored (``tokens/char_floor.py``): the fewest tokens a request's
prompt can take, from its characters, without tokenizing it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokenplane.tokens.char_floor import CharFloor
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.counts import TokenCounts
from tokenplane.tokens.messages import normalize
from tokenplane.tokens.prompt_batch import prompt_batch
from tokenplane.tokens.template_base import ChatTemplate


class FloorParts:
    """A :class:`~tokenplane.tokens.prompt_parts.PartCounter` whose counts are the
    floors of the parts (in ``user``): what the operation hands the counter, floored."""

    __slots__ = ("floor", "template")

    def __init__(self, template: ChatTemplate, floor: CharFloor) -> None:
        self.template = template
        self.floor = floor

    def messages(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> CountResult:
        total = 0
        run: list[str] = []
        tokens = self.floor.run_tokens
        for p in self.template.pieces(normalize(messages), tools):
            if p.ids:
                if run:
                    total += tokens(run)
                    run = []
                total += len(p.ids)
            elif p.text:
                run.append(p.text)
        if run:
            total += tokens(run)
        return CountResult(TokenCounts(user=total))

    def _items(self, value: Any) -> CountResult:
        total = 0
        for item in [value] if isinstance(value, str) else value:
            if isinstance(item, str):
                total += self.floor.tokens(item)
            elif isinstance(item, int):
                total += 1
            elif isinstance(item, list):
                total += len(item)
        return CountResult(TokenCounts(user=total))

    def prompt(self, prompt: Any) -> CountResult:
        result = self._items(prompt)
        batch = prompt_batch(prompt)
        if batch is not None and len(batch) > 1:  # what must fit: the longest prompt
            result.longest = max(self._items([p]).counts.prompt
                                 if isinstance(p, str) else len(p) for p in batch)
        return result

    def inputs(self, value: Any) -> CountResult:
        return self._items(value)
