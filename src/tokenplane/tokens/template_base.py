"""Chat templates as sequences of pieces: text to tokenize, or framing token ids.

A template turns a conversation into :class:`Piece` objects, each tagged with the
``TokenCounts`` source it belongs to. Consecutive text pieces form a *run* that is
tokenized as one string (exactly as the engine tokenizes the rendered prompt, where only
special tokens split the text), so ``encode`` equals the tokenizer's encoding of the
rendered template string whenever the framing ids are real special tokens of the
vocabulary. The fast counter (:mod:`tokenplane.tokens.counter`) counts the same runs
through the segment cache, so its total equals ``len(encode(...))`` by construction.

Image parts become ``image_tokens`` copies of ``IMAGE_PLACEHOLDER_ID`` after the message's
text (an estimate; the counter flags it).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.messages import DEFAULT_IMAGE_TOKENS, ChatMessage, Conversation, normalize

IMAGE_PLACEHOLDER_ID = 0
TOOLS_MEMO_SIZE = 64

Tools = Sequence[Mapping[str, Any]] | None


class Piece(NamedTuple):
    """Text (``ids`` empty) or framing ids (``label`` is their text form), with a source."""

    source: str
    text: str = ""
    ids: tuple[int, ...] = ()
    label: str = ""


def special_ids(tokenizer: Tokenizer, label: str, fallback: int | None = None) -> tuple[int, ...]:
    """Ids of a framing token: the vocabulary's special token, else ``fallback``, else text."""
    lookup = getattr(tokenizer, "special_id", None)
    if lookup is not None:
        found = lookup(label)
        if isinstance(found, int):
            return (found,)
    if fallback is not None:
        return (fallback,)
    return tuple(tokenizer.encode(label))


def tools_json(tools: Tools) -> str:
    """The tool list as compact-spaced JSON (``json.dumps`` defaults, non-ASCII kept)."""
    return json.dumps(list(tools or ()), ensure_ascii=False)


def tool_json(tool: Mapping[str, Any]) -> str:
    return json.dumps(tool, ensure_ascii=False)


def arguments_json(arguments: str) -> str:
    """Tool-call arguments re-serialised as JSON (as vLLM parses them before templating)."""
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except ValueError:
        return json.dumps(arguments, ensure_ascii=False)


def content_pieces(
    m: ChatMessage, prefix: str = "", suffix: str = "", strip: bool = False
) -> list[Piece]:
    """``prefix + content + suffix`` as pieces; parts marked as context count as ``context``.

    ``strip`` trims the content (not prefix/suffix) as ``str.strip`` would.
    """
    if not m.parts:
        body = m.content.strip() if strip else m.content
        return [Piece(m.source, prefix + body + suffix)]
    last = len(m.parts) - 1
    texts = [t + ("\n" if i < last else "") for i, (t, _) in enumerate(m.parts)]
    if strip:
        for i in range(len(texts)):
            texts[i] = texts[i].lstrip()
            if texts[i]:
                break
        for i in range(last, -1, -1):
            texts[i] = texts[i].rstrip()
            if texts[i]:
                break
    texts[0] = prefix + texts[0]
    texts[last] += suffix
    return [
        Piece("context" if ctx else m.source, t)
        for t, (_, ctx) in zip(texts, m.parts, strict=True)
        if t
    ]


class ChatTemplate:
    """Base: subclasses implement :meth:`pieces`; encoding and rendering are shared."""

    family = "base"

    def __init__(self, tokenizer: Tokenizer, image_tokens: int = DEFAULT_IMAGE_TOKENS) -> None:
        self.tokenizer = tokenizer
        self.image_tokens = image_tokens
        self._tools_memo: dict[bytes, str] = {}
        self._specials: dict[tuple[str, str, int | None], Piece] = {}

    def tools_text(self, tools: Tools, render: Callable[[Tools], str]) -> str:
        """``render(tools)``, memoised by the tools' orjson bytes (a repeated tool schema is
        serialised by orjson, ~1 us, instead of re-rendered with ``json.dumps``)."""
        try:
            key = orjson.dumps(tools)
        except TypeError:
            return render(tools)
        memo = self._tools_memo
        found = memo.get(key)
        if found is None:
            found = render(tools)
            if len(memo) >= TOOLS_MEMO_SIZE:
                # a counting thread may be trimming it too (pipeline/count_offload.py)
                with contextlib.suppress(StopIteration, RuntimeError, KeyError):
                    memo.pop(next(iter(memo)))
            memo[key] = found
        return found

    def pieces(self, conv: Conversation, tools: Tools) -> list[Piece]:
        raise NotImplementedError

    def image_piece(self, m: ChatMessage) -> list[Piece]:
        if not m.images:
            return []
        return [Piece(m.source, ids=(IMAGE_PLACEHOLDER_ID,) * (m.images * self.image_tokens))]

    def special(self, source: str, label: str, fallback: int | None = None) -> Piece:
        """A framing piece (memoised: templates emit the same few many times)."""
        key = (source, label, fallback)
        found = self._specials.get(key)
        if found is None:
            found = Piece(source, ids=special_ids(self.tokenizer, label, fallback), label=label)
            self._specials[key] = found
        return found

    def encode(self, messages: Sequence[Mapping[str, Any]], tools: Tools = None) -> list[int]:
        """The full prompt ids (ground truth for counting)."""
        return self.encode_pieces(self.pieces(normalize(messages), tools))

    def encode_pieces(self, pieces: Sequence[Piece]) -> list[int]:
        out: list[int] = []
        run: list[str] = []
        for p in pieces:
            if p.ids:
                if run:
                    out.extend(self.tokenizer.encode("".join(run)))
                    run.clear()
                out.extend(p.ids)
            elif p.text:
                run.append(p.text)
        if run:
            out.extend(self.tokenizer.encode("".join(run)))
        return out

    def render(self, messages: Sequence[Mapping[str, Any]], tools: Tools = None) -> str:
        """The prompt as a string, framing tokens written as their labels."""
        pieces = self.pieces(normalize(messages), tools)
        return "".join(p.label if p.ids else p.text for p in pieces)
