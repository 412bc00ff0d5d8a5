"""The endpoint kinds the gateway serves, by path: one registry, built by a function.

Adding a kind is one module (an :class:`~tokenplane.operations.base.Operation`
subclass and its instance) plus its line in :func:`standard_operations`; the HTTP
routes (aiohttp and the fast front) and the simulated engine serve what is registered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from tokenplane.dialects.base import OPENAI, Dialect
from tokenplane.operations.base import Operation
from tokenplane.operations.chat import CHAT
from tokenplane.operations.completions import COMPLETIONS
from tokenplane.operations.embeddings import EMBEDDINGS
from tokenplane.operations.messages import MESSAGES


class OperationRegistry:
    """Operations by path (and by name); fixed once built."""

    __slots__ = ("_by_name", "by_path")

    def __init__(self, operations: Iterable[Operation]) -> None:
        by_path: dict[str, Operation] = {}
        by_name: dict[str, Operation] = {}
        for op in operations:
            if not op.path or not op.name:
                raise ValueError(f"{op!r} needs a path and a name")
            if op.path in by_path or op.name in by_name:
                raise ValueError(f"{op!r}: its path or name is already registered")
            by_path[op.path] = by_name[op.name] = op
        self.by_path: Mapping[str, Operation] = by_path  # the request path's lookup
        self._by_name: Mapping[str, Operation] = by_name

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.by_path.values())

    def __len__(self) -> int:
        return len(self.by_path)

    def __contains__(self, path: object) -> bool:
        return path in self.by_path

    def __getitem__(self, path: str) -> Operation:
        return self.by_path[path]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(self.by_path)

    def dialect_for(self, path: str) -> Dialect:
        """The wire dialect spoken at ``path``: its operation's, or that of the operation
        whose path it extends (``/v1/messages/count_tokens`` speaks ``/v1/messages``'s);
        OpenAI's for any other path."""
        op = self.by_path.get(path)
        if op is not None:
            return op.dialect
        best: Operation | None = None
        for p, o in self.by_path.items():
            if path.startswith(p + "/") and (best is None or len(p) > len(best.path)):
                best = o
        return best.dialect if best is not None else OPENAI

    def named(self, name: str) -> Operation:
        """The operation whose ledger name is ``name`` (KeyError if none)."""
        return self._by_name[name]

    def with_operations(self, *more: Operation) -> OperationRegistry:
        """A new registry: these operations and ``more``."""
        return OperationRegistry((*self, *more))


def standard_operations() -> OperationRegistry:
    """The kinds the gateway serves: OpenAI's, and Anthropic's Messages."""
    return OperationRegistry((CHAT, COMPLETIONS, EMBEDDINGS, MESSAGES))
