"""Chat messages normalised for counting, and the source each message's tokens belong to.

Source convention (``TokenCounts`` fields):

- ``system``: messages with role ``system`` or ``developer`` (not marked as context).
- ``context``: RAG documents and tool results. A message is context when its role is
  ``tool`` (or the legacy ``function``), or its ``name`` starts with ``context``, ``rag``
  or ``doc`` (case-insensitive), or it carries the metadata field
  ``"tokenplane_source": "context"``. A content part carrying
  ``"tokenplane_source": "context"`` inside any other message counts as context too.
- ``user``: the current turn, i.e. the last message with role ``user`` that is not context.
  Priming tokens (the generation prompt) count here too.
- ``history``: every other message (earlier user and assistant turns).
- ``tools``: the tool/function definitions rendered into the prompt.

Content is a string or a list of parts. Text parts (``{"type": "text", "text": ...}``) are
joined in order with ``"\\n"`` (as vLLM does for string-only chat templates); the separator
after a part counts with that part. Image parts
(``image_url`` / ``input_image`` / ``image``) are not text: each counts as a fixed
estimate of tokens (``image_tokens``, default 765 = OpenAI's 1024x1024 high-detail cost)
and flags the result as estimated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SOURCE_KEY = "tokenplane_source"
CONTEXT_NAME_PREFIXES = ("context", "rag", "doc")
IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})
# parts with no text of their own: the gateway does not count them (the upstream's usage,
# which bills them, is the truth for the ledger)
MEDIA_PART_TYPES = frozenset({"input_audio", "file", "audio_url", "video_url"})
DEFAULT_IMAGE_TOKENS = 765
_CONTEXT_ROLES = frozenset({"tool", "function"})


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str
    type: str = "function"


@dataclass(slots=True)
class ChatMessage:
    """One message, reduced to what the chat templates render.

    ``content`` is the text (parts joined with ``"\\n"``); ``parts`` keeps the text parts in
    order with a context flag, only when some part is marked as context (else empty).
    """

    role: str
    content: str
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    images: int = 0
    parts: tuple[tuple[str, bool], ...] = ()
    marked_context: bool = False
    source: str = "history"


@dataclass(slots=True)
class Conversation:
    messages: list[ChatMessage]
    images: int = 0
    flags: set[str] = field(default_factory=set)


def _text_of(content: Any) -> tuple[str, tuple[tuple[str, bool], ...], int]:
    """(joined text, ordered (text, is_context) parts if any is context, image count)."""
    if content is None:
        return "", (), 0
    if isinstance(content, str):
        return content, (), 0
    if not isinstance(content, Sequence):
        raise ValueError("message content must be a string or a list of parts")
    parts: list[tuple[str, bool]] = []
    images = 0
    for part in content:
        if isinstance(part, str):
            parts.append((part, False))
            continue
        if not isinstance(part, Mapping):
            raise ValueError("content parts must be objects")
        kind = part.get("type", "text")
        if kind in IMAGE_PART_TYPES:
            images += 1
            continue
        if kind in MEDIA_PART_TYPES:
            continue
        text = part.get("refusal" if kind == "refusal" else "text")
        if not isinstance(text, str):
            raise ValueError(f"content part of type {kind!r} has no text")
        parts.append((text, part.get(SOURCE_KEY) == "context"))
    joined = "\n".join(t for t, _ in parts)
    marked = any(c for _, c in parts)
    return joined, tuple(parts) if marked else (), images


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    if not raw:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ValueError("tool_calls must be a list")
    calls: list[ToolCall] = []
    for call in raw:
        if not isinstance(call, Mapping):
            raise ValueError("tool_calls entries must be objects")
        fn = call.get("function", call)
        if not isinstance(fn, Mapping):
            raise ValueError("tool_calls[].function must be an object")
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append(ToolCall(str(fn.get("name", "")), args, str(call.get("type", "function"))))
    return tuple(calls)


def _is_context(msg: Mapping[str, Any], role: str, name: str | None) -> bool:
    if role in _CONTEXT_ROLES or msg.get(SOURCE_KEY) == "context":
        return True
    return name is not None and name.lower().startswith(CONTEXT_NAME_PREFIXES)


def normalize(messages: Sequence[Mapping[str, Any]]) -> Conversation:
    """Normalise OpenAI-style messages and classify each by source (see module doc)."""
    out: list[ChatMessage] = []
    total_images = 0
    for msg in messages:
        if type(msg) is dict and len(msg) == 2:  # the common {"role", "content"} shape
            role, content = msg.get("role"), msg.get("content")
            if type(role) is str and type(content) is str:
                out.append(ChatMessage(role, content, marked_context=role in _CONTEXT_ROLES))
                continue
        if not isinstance(msg, Mapping):
            raise ValueError("each message must be an object")
        role = msg.get("role")
        if not isinstance(role, str):
            raise ValueError("each message needs a string role")
        raw_name = msg.get("name")
        name = raw_name if isinstance(raw_name, str) and raw_name else None
        text, parts, images = _text_of(msg.get("content"))
        total_images += images
        m = ChatMessage(role, text, name, _tool_calls(msg.get("tool_calls")), images, parts)
        m.marked_context = _is_context(msg, role, name)
        out.append(m)
    last_user = -1
    for i, m in enumerate(out):
        if m.role == "user" and not m.marked_context:
            last_user = i
    for i, m in enumerate(out):
        if m.marked_context:  # a system message of RAG documents is context, too
            m.source = "context"
        elif m.role in ("system", "developer"):
            m.source = "system"
        elif i == last_user:
            m.source = "user"
        else:
            m.source = "history"
    conv = Conversation(out, total_images)
    if total_images:
        conv.flags.add("image_estimate")
    return conv
