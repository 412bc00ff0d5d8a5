"""An endpoint kind (chat completions, completions, embeddings, ...) as one object.

An :class:`Operation` owns everything that differs between the kinds: where it is
served (``path``), its name in the ledger and in traces (``name``), the checks of its
body, which field caps the output, which parts of the body make the prompt (to count
it and to hash its prefix for routing), how to read text out of its answers and how a
stream of it ends. The stages of the token path ask the request's operation and never
compare kinds. The operations are registered by path in an
:class:`~tokenplane.operations.registry.OperationRegistry`.

Operations are stateless singletons (class attributes, no per-request allocation).
The answer readers below suit OpenAI's ``choices`` answers (chat and completions);
a kind with another answer shape overrides them.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from tokenplane.dialects.base import OPENAI, Dialect
from tokenplane.operations.fields import Obj
from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.prompt_parts import PartCounter

Segment = tuple[int, Hashable]  # (characters, hashable content): a prompt prefix piece


class Operation:
    """One endpoint kind. Subclasses set the attributes and the abstract methods."""

    __slots__ = ()

    path: str = ""  # where the gateway serves it, e.g. "/v1/chat/completions"
    # where its canonical request is sent upstream (a backend type translates from there)
    upstream_path: str = ""
    name: str = ""  # the ledger's ``operation`` and ``gen_ai.operation.name``
    generates: bool = True  # produces output tokens (an output cap, a context window)
    cap_fields: tuple[str, ...] = ()  # the fields that cap the output, the first set wins
    content_field: str = ""  # the body field holding what the client sent as the prompt
    messages_field: str | None = None  # the prompt is a list of chat messages there
    tools: bool = False  # the body may define tools (the tool allow-list applies)
    chat_choices: bool = False  # answers carry ``message`` / ``delta`` objects, not ``text``
    chunk_object: str = ""  # the ``object`` of a stream chunk
    cacheable: bool = False  # its answers may be served from the response caches
    dialect: Dialect = OPENAI  # the client's wire: auth headers, errors, answer rendering

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if not cls.__dict__.get("upstream_path") and "path" in cls.__dict__:
            cls.upstream_path = cls.path  # an OpenAI kind: its own path

    def __repr__(self) -> str:
        return f"<operation {self.name} {self.path}>"

    # -- the request ------------------------------------------------------------------

    def validate(self, body: dict[str, Any]) -> None:
        """Raise an OpenAI 400 (``invalid``) naming the field to fix."""
        raise NotImplementedError

    def canonical(self, body: dict[str, Any]) -> dict[str, Any]:
        """The client's body checked and turned into the canonical request the stages
        work on; an OpenAI kind's body is its own canonical form."""
        self.validate(body)
        return body

    def body_spec(self) -> Obj | None:
        """The body's fields as one spec (``operations/fields.py``): what
        :meth:`validate` checks by type and range, and what ``GET /openapi.json``
        publishes; None for a kind that checks its body by hand only."""
        return None

    def requested_max_tokens(self, body: dict[str, Any]) -> int | None:
        """The output cap the client asked for (None: none, or a kind with no output)."""
        for f in self.cap_fields:
            value = body.get(f)
            if value is not None:
                return int(value)
        return None

    def cap_param(self, body: dict[str, Any]) -> str:
        """The field to name (or to set) for the output cap of ``body``."""
        fields = self.cap_fields
        for f in fields[:-1]:
            if f in body:
                return f
        return fields[-1] if fields else "max_tokens"

    def count_prompt(self, counter: PartCounter, body: dict[str, Any]) -> CountResult:
        """The prompt's tokens by source: the parts of ``body`` handed to ``counter``."""
        raise NotImplementedError

    def prompts(self, body: dict[str, Any]) -> int:
        """How many prompts ``body`` holds, each answered on its own (a completions
        batch): the output is reserved for each."""
        return 1

    def prefix_segments(self, body: dict[str, Any]) -> list[Segment] | None:
        """The prompt as ordered content segments for prefix-cache routing (see
        ``routing/prompt_blocks.py``); None when the kind has no prefix to reuse."""
        return None

    # -- the answer -------------------------------------------------------------------

    def answer_text(self, obj: dict[str, Any]) -> tuple[str, str]:
        """Visible and reasoning text of a whole (non-stream) answer."""
        choices = [ch for ch in obj.get("choices") or () if isinstance(ch, dict)]
        return join_texts(choices, "message")

    def stream_text(self, events: list[dict[str, Any]]) -> tuple[str, str]:
        """Visible and reasoning text of the stream chunks relayed (parsed)."""
        firsts: list[dict[str, Any]] = []
        for obj in events:
            choices = obj.get("choices")
            if choices and isinstance(choices[0], dict):
                firsts.append(choices[0])
        return join_texts(firsts, "delta")

    def chunk_has_text(self, choices: list[Any]) -> bool:
        """True when a stream chunk's choices carry output (not the opening role chunk)."""
        ch = choices[0] if isinstance(choices[0], dict) else {}
        delta = ch.get("delta")
        if isinstance(delta, dict):
            return bool(delta.get("content") or delta.get("reasoning_content")
                        or delta.get("tool_calls"))
        return bool(ch.get("text"))

    def answer_record(self, obj: Any) -> Any:
        """What the audit log keeps of a whole answer: the first choice's text (and
        tool calls), or None."""
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return None
        ch = choices[0]
        msg = ch.get("message")
        if isinstance(msg, dict):
            calls = msg.get("tool_calls")
            content = msg.get("content")
            return {"text": content, "tool_calls": calls} if calls else content
        return ch.get("text")

    def end_choice(self, finish_reason: str) -> dict[str, Any]:
        """The choice of a stream's closing chunk (no text, ``finish_reason`` set)."""
        raise NotImplementedError

    def text_choice(self, index: int, text: str) -> dict[str, Any]:
        """A stream chunk's choice carrying ``text`` (still unfinished)."""
        raise NotImplementedError


def join_texts(choices: list[dict[str, Any]], part: str) -> tuple[str, str]:
    """Visible and reasoning text of choices whose text sits under ``part``
    (``message`` or ``delta``), or directly as ``text`` (completions)."""
    text: list[str] = []
    reasoning: list[str] = []
    for ch in choices:
        inner = ch.get(part)
        src = inner if isinstance(inner, dict) else ch
        t = src.get("content") if isinstance(inner, dict) else src.get("text")
        r = src.get("reasoning_content")
        if isinstance(t, str):
            text.append(t)
        if isinstance(r, str):
            reasoning.append(r)
    return "".join(text), "".join(reasoning)
