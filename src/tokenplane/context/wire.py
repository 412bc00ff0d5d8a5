"""The packer's JSON face, shared by a chat request's ``tokenplane.context`` object and
``POST /v1/context/pack``: documents and options from checked JSON
(``operations/context_fields.py`` checks the types), the user's turn of a chat, and
the packed result as JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokenplane.context.documents import Document, Packed, PackOptions

DEFAULTS = PackOptions()


def documents(items: Sequence[Mapping[str, Any]]) -> list[Document]:
    return [Document(d["id"], d["text"], d.get("score"), d.get("source"), d.get("metadata"))
            for d in items]


def duplicate_id(items: Sequence[Mapping[str, Any]]) -> int | None:
    """The index of the first document whose id repeats an earlier one."""
    seen: set[str] = set()
    for i, d in enumerate(items):
        if d["id"] in seen:
            return i
        seen.add(d["id"])
    return None


def options(raw: Mapping[str, Any] | None) -> PackOptions:
    """Pack options from a checked ``options`` object (unset fields: the defaults)."""
    if not raw:
        return DEFAULTS
    known = {k: v for k, v in raw.items() if v is not None and k in _FIELDS}
    return PackOptions(**{**{f: getattr(DEFAULTS, f) for f in _FIELDS}, **known})


_FIELDS = ("dedup", "near_duplicate_threshold", "rank", "order", "truncate", "header")


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def user_turn(messages: Sequence[Mapping[str, Any]] | None) -> str:
    """The text of the last user message (the query BM25 ranks against)."""
    for m in reversed(messages or ()):
        if m.get("role") == "user":
            return message_text(m)
    return ""


def packed_json(packed: Packed) -> dict[str, Any]:
    """``{text, tokens, citations, kept, dropped, offered_tokens, kept_tokens,
    dropped_tokens}``: the standalone call's answer."""
    return {
        "text": packed.text,
        "tokens": packed.tokens,
        "citations": packed.citations,
        "kept": [{"id": k.id, "marker": k.marker, "tokens": k.tokens,
                  "truncated": k.truncated} for k in packed.kept],
        "dropped": [{"id": d.id, "reason": d.reason, "tokens": d.tokens,
                     **({"duplicate_of": d.of} if d.of is not None else {})}
                    for d in packed.dropped],
        "offered_tokens": packed.offered_tokens,
        "kept_tokens": packed.kept_tokens,
        "dropped_tokens": packed.dropped_tokens,
    }
