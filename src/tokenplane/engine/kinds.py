"""How the simulated engine serves each endpoint kind: one engine kind per operation,
registered by the operation's name (the gateway's ``tokenplane.operations``).

A generating kind (chat, completions) owns its body checks, which parts of the body
make the prompt ids, the answer's id prefix and its formatter; the service runs the
generation itself. Embeddings answer at once. A new endpoint kind adds its operation
(``operations/``) and, to be served by the simulator, its engine kind here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any, Protocol

from tokenplane.engine.openai_format import ChatFormatter, Formatter, TextFormatter
from tokenplane.engine.validation import check_messages, check_prompt
from tokenplane.operations.base import Operation
from tokenplane.operations.chat import CHAT
from tokenplane.operations.completions import COMPLETIONS
from tokenplane.operations.embeddings import EMBEDDINGS
from tokenplane.operations.messages import MESSAGES
from tokenplane.tokens.prompt_batch import prompt_list
from tokenplane.tokens.prompt_parts import PromptEncoder

Body = dict[str, Any]
Headers = Mapping[str, str]
Handler = Callable[[Body, Headers], Awaitable[Any]]


class Host(Protocol):
    """What a kind needs from the service (``engine/serving/service.py``)."""

    def generate(self, kind: GenerationKind, body: Body, headers: Headers) -> Awaitable[Any]:
        ...

    def embed(self, body: Body, headers: Headers) -> Awaitable[Any]: ...

    def messages(self, body: Body, headers: Headers) -> Awaitable[Any]: ...


class EngineKind(Protocol):
    operation: Operation

    def handler(self, host: Host) -> Handler: ...


class GenerationKind:
    """A kind the engine generates tokens for."""

    __slots__ = ("name", "operation")

    prompt_param = ""  # the field named when the prompt is empty
    id_prefix = ""  # of the answer's id
    formatter: type[Formatter] = Formatter

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.name = operation.name

    def check(self, body: Body) -> None:
        raise NotImplementedError

    def prompt_ids(self, encoder: PromptEncoder, body: Body) -> list[int]:
        raise NotImplementedError

    def prompt_batch(self, encoder: PromptEncoder, body: Body) -> list[list[int]]:
        """The ids of each prompt the body holds (one but for a completions batch),
        each answered ``n`` times."""
        return [self.prompt_ids(encoder, body)]

    def handler(self, host: Host) -> Handler:
        return partial(host.generate, self)


class ChatServing(GenerationKind):
    __slots__ = ()

    prompt_param = "messages"
    id_prefix = "chatcmpl"
    formatter = ChatFormatter

    def check(self, body: Body) -> None:
        check_messages(body)

    def prompt_ids(self, encoder: PromptEncoder, body: Body) -> list[int]:
        return encoder.messages(body["messages"], body.get("tools"))


class TextServing(GenerationKind):
    __slots__ = ()

    prompt_param = "prompt"
    id_prefix = "cmpl"
    formatter = TextFormatter

    def check(self, body: Body) -> None:
        check_prompt(body.get("prompt"))

    def prompt_ids(self, encoder: PromptEncoder, body: Body) -> list[int]:
        return encoder.prompt(body.get("prompt"))

    def prompt_batch(self, encoder: PromptEncoder, body: Body) -> list[list[int]]:
        return [encoder.prompt(p) for p in prompt_list(body.get("prompt"))]


class EmbeddingServing:
    """Deterministic unit vectors, answered at once (``engine/endpoints.py``)."""

    __slots__ = ("operation",)

    def __init__(self, operation: Operation) -> None:
        self.operation = operation

    def handler(self, host: Host) -> Handler:
        return host.embed


class MessagesServing:
    """Anthropic's Messages API: generated as chat, answered as Messages (the host's
    ``messages``)."""

    __slots__ = ("operation",)

    def __init__(self, operation: Operation) -> None:
        self.operation = operation

    def handler(self, host: Host) -> Handler:
        return host.messages


class EngineKinds:
    """The engine kinds by operation name; fixed once built."""

    __slots__ = ("_by_name",)

    def __init__(self, kinds: Iterable[EngineKind]) -> None:
        by_name: dict[str, EngineKind] = {}
        for kind in kinds:
            if kind.operation.name in by_name:
                raise ValueError(f"{kind.operation!r} is already served")
            by_name[kind.operation.name] = kind
        self._by_name = by_name

    def __iter__(self) -> Iterator[EngineKind]:
        return iter(self._by_name.values())

    def get(self, name: str) -> EngineKind | None:
        return self._by_name.get(name)

    def generation(self, name: str) -> GenerationKind:
        """The generating kind of operation ``name`` (KeyError if none)."""
        kind = self._by_name[name]
        if not isinstance(kind, GenerationKind):
            raise KeyError(name)
        return kind


def served_kinds() -> EngineKinds:
    """What the simulated engine serves (vLLM's OpenAI routes and Anthropic's Messages)."""
    return EngineKinds((ChatServing(CHAT), TextServing(COMPLETIONS), EmbeddingServing(EMBEDDINGS),
                        MessagesServing(MESSAGES)))
