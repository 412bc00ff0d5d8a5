"""A Messages request's ``system`` and ``messages`` as canonical chat messages.

User blocks become content parts (text, ``image_url``, ``file``); each ``tool_result``
becomes a ``tool`` message placed before the user message holding the user's other
blocks (and the result's images, which a chat tool message cannot hold, marked
``x_anthropic.tool_result``). Assistant text is joined into ``content``, ``tool_use``
blocks become ``tool_calls`` and thinking becomes ``reasoning_content``, with the
thinking blocks kept verbatim in ``x_anthropic.thinking_blocks`` (their signatures
cover them).
"""

from __future__ import annotations

import json
from typing import Any

from tokenplane.dialects.anthropic.checks import (
    bad,
    cache_control,
    need_dict,
    need_list,
    need_str,
)
from tokenplane.dialects.anthropic.extension import EXT

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
USER_BLOCKS = frozenset({"text", "image", "document", "tool_result"})
ASSISTANT_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})
KNOWN_BLOCKS = USER_BLOCKS | ASSISTANT_BLOCKS | frozenset({
    "search_result", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
    "code_execution_tool_result", "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result", "mcp_tool_use", "mcp_tool_result",
    "container_upload", "tool_search_tool_result", "tool_reference",
})


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _with_cc(part: dict[str, Any], cc: dict[str, Any] | None) -> dict[str, Any]:
    if cc is not None:
        part[EXT] = {"cache_control": cc}
    return part


def system_message(system: Any, where: str = "system") -> dict[str, Any] | None:
    """The ``system`` field as the first chat message (None when empty); also a
    ``role: system`` message inside ``messages`` (``where`` its content's path), which
    Claude Code sends for per-turn instructions (beta ``per-turn-control``)."""
    if isinstance(system, str):
        return {"role": "system", "content": system} if system else None
    blocks = need_list(system, where)
    parts = []
    for i, b in enumerate(blocks):
        path = f"{where}[{i}]"
        b = need_dict(b, path)
        if b.get("type") != "text":
            raise bad(f"{path}.type", "system blocks must be of type 'text'")
        parts.append(_with_cc({"type": "text", "text": need_str(b, "text", path)},
                              cache_control(b, path)))
    return {"role": "system", "content": parts} if parts else None


def _block_type(b: dict[str, Any], path: str, allowed: frozenset[str], role: str) -> str:
    t = b.get("type")
    if not isinstance(t, str):
        raise bad(f"{path}.type", "Field required")
    if t not in allowed:
        if t in KNOWN_BLOCKS:
            raise bad(f"{path}.type", f"a '{t}' block is not supported in a {role} message "
                      "here", code="unsupported_content")
        raise bad(f"{path}.type", f"unknown content block type '{t}'")
    return t


def _image(b: dict[str, Any], path: str) -> dict[str, Any]:
    src = need_dict(b.get("source"), f"{path}.source")
    kind = src.get("type")
    if kind == "base64":
        media = need_str(src, "media_type", f"{path}.source")
        if media not in IMAGE_TYPES:
            raise bad(f"{path}.source.media_type", f"unsupported image type '{media}'")
        url = f"data:{media};base64,{need_str(src, 'data', f'{path}.source')}"
    elif kind == "url":
        url = need_str(src, "url", f"{path}.source")
    else:
        raise bad(f"{path}.source.type", "image sources must be 'base64' or 'url' here")
    return {"type": "image_url", "image_url": {"url": url}}


def _document(b: dict[str, Any], path: str) -> dict[str, Any]:
    src = need_dict(b.get("source"), f"{path}.source")
    kind = src.get("type")
    meta = {k: b[k] for k in ("title", "context", "citations") if b.get(k) is not None}
    part: dict[str, Any]
    if kind == "text":
        part = {"type": "text", "text": need_str(src, "data", f"{path}.source")}
    elif kind == "base64":
        if src.get("media_type") != "application/pdf":
            raise bad(f"{path}.source.media_type", "base64 documents must be application/pdf")
        data = need_str(src, "data", f"{path}.source")
        title = b.get("title")
        part = {"type": "file", "file": {
            "file_data": f"data:application/pdf;base64,{data}",
            "filename": title if isinstance(title, str) and title else "document.pdf"}}
    else:
        raise bad(f"{path}.source.type",
                  "document sources must be 'text' or 'base64' (PDF) here",
                  code="unsupported_content")
    x: dict[str, Any] = {}
    if meta:
        x["document"] = meta
    cc = cache_control(b, path)
    if cc is not None:
        x["cache_control"] = cc
    if x:
        part[EXT] = x
    return part


def _tool_result(b: dict[str, Any], path: str, known_ids: set[str],
                 parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``tool`` message of a tool_result; the images in its content are appended to
    ``parts`` (the user message's), marked ``x_anthropic.tool_result: <id>`` so an
    Anthropic backend gets them back inside the result."""
    call_id = need_str(b, "tool_use_id", path)
    if call_id not in known_ids:
        raise bad(f"{path}.tool_use_id", f"no earlier tool_use block has the id '{call_id}'")
    content = b.get("content")
    cc = cache_control(b, path)
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    else:
        texts = []
        for j, inner in enumerate(need_list(content, f"{path}.content")):
            ipath = f"{path}.content[{j}]"
            inner = need_dict(inner, ipath)
            kind = inner.get("type")
            if kind == "image":
                image = _image(inner, ipath)
                x: dict[str, Any] = {"tool_result": call_id}
                icc = cache_control(inner, ipath)
                if icc is not None:
                    x["cache_control"] = icc
                image[EXT] = x
                parts.append(image)
                continue
            if kind != "text":
                raise bad(f"{ipath}.type", "only text and images are supported in a "
                          "tool_result here", code="unsupported_content")
            texts.append(need_str(inner, "text", ipath))
            cc = cache_control(inner, ipath) or cc
        text = "\n".join(texts)
    msg: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": text}
    mx: dict[str, Any] = {}
    is_error = b.get("is_error")
    if is_error not in (None, True, False):
        raise bad(f"{path}.is_error", "Input should be a boolean")
    if is_error:
        mx["is_error"] = True
    if cc is not None:
        mx["cache_control"] = cc
    if mx:
        msg[EXT] = mx
    return msg


def _user(content: list[Any], path: str, known_ids: set[str]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for i, b in enumerate(content):
        bpath = f"{path}[{i}]"
        b = need_dict(b, bpath)
        t = _block_type(b, bpath, USER_BLOCKS, "user")
        if t == "text":
            parts.append(_with_cc({"type": "text", "text": need_str(b, "text", bpath)},
                                  cache_control(b, bpath)))
        elif t == "image":
            parts.append(_with_cc(_image(b, bpath), cache_control(b, bpath)))
        elif t == "document":
            parts.append(_document(b, bpath))
        else:
            tools.append(_tool_result(b, bpath, known_ids, parts))
    if parts or not tools:
        tools.append({"role": "user", "content": parts})
    return tools


def _assistant(content: list[Any], path: str, known_ids: set[str]) -> dict[str, Any]:
    texts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    call_cc: dict[str, Any] = {}
    for i, b in enumerate(content):
        bpath = f"{path}[{i}]"
        b = need_dict(b, bpath)
        t = _block_type(b, bpath, ASSISTANT_BLOCKS, "assistant")
        cc = cache_control(b, bpath)
        if t == "text":
            texts.append(_with_cc({"type": "text", "text": need_str(b, "text", bpath)}, cc))
        elif t == "tool_use":
            call_id = need_str(b, "id", bpath)
            name = need_str(b, "name", bpath)
            args = need_dict(b.get("input"), f"{bpath}.input")
            known_ids.add(call_id)
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": name, "arguments": compact_json(args)}})
            if cc is not None:
                call_cc[call_id] = cc
        elif t == "thinking":
            need_str(b, "thinking", bpath)
            need_str(b, "signature", bpath)
            thinking.append(b)
        else:
            need_str(b, "data", bpath)
            thinking.append(b)
    msg: dict[str, Any] = {"role": "assistant"}
    if any(EXT in p for p in texts):
        msg["content"] = texts
    elif texts or not calls:
        msg["content"] = "".join(p["text"] for p in texts)
    else:
        msg["content"] = None
    if calls:
        msg["tool_calls"] = calls
    x: dict[str, Any] = {}
    if thinking:
        msg["reasoning_content"] = "".join(
            b["thinking"] for b in thinking if b["type"] == "thinking")
        x["thinking_blocks"] = thinking
    if call_cc:
        x["tool_call_cache_control"] = call_cc
    if x:
        msg[EXT] = x
    return msg


def chat_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """The ``messages`` list (already known to be a non-empty list) as chat messages."""
    out: list[dict[str, Any]] = []
    known_ids: set[str] = set()
    for i, m in enumerate(messages):
        path = f"messages[{i}]"
        m = need_dict(m, path)
        role = m.get("role")
        if role not in ("user", "assistant", "system"):
            raise bad(f"{path}.role", "Input should be 'user', 'assistant' or 'system'")
        content = m.get("content")
        if role == "system":
            sm = system_message(content, f"{path}.content")
            if sm is not None:
                out.append(sm)
            continue
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        content = need_list(content, f"{path}.content")
        if role == "user":
            out.extend(_user(content, f"{path}.content", known_ids))
        else:
            out.append(_assistant(content, f"{path}.content", known_ids))
    return out
