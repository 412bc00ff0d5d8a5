"""A canonical chat body as an Anthropic Messages request, for ``type: anthropic``
backends: what the client sent, from either dialect, with the ``x_anthropic``
extensions put back where ``request.py`` took them from.

Chat fields Anthropic has no use for (``n``, ``seed``, ``logprobs``, penalties,
``response_format``, ``stream_options``, the client's ``metadata``) are dropped; a
``temperature`` or ``top_p`` above 1 is capped at 1. Reasoning without a signature
(``reasoning_content`` from another backend) cannot be sent back to Anthropic and is
dropped; thinking blocks kept in ``x_anthropic.thinking_blocks`` are sent verbatim.
"""

from __future__ import annotations

from typing import Any

from tokenplane.dialects.anthropic.answer import message_text, tool_input
from tokenplane.dialects.anthropic.checks import bad, is_int, is_number
from tokenplane.dialects.anthropic.extension import ext
from tokenplane.dialects.anthropic.request import CARRIED

THINKING_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}
MIN_THINKING_BUDGET = 1024


def _cc(block: dict[str, Any], holder: dict[str, Any]) -> dict[str, Any]:
    cc = ext(holder).get("cache_control")
    if isinstance(cc, dict):
        block["cache_control"] = cc
    return block


def _data_url(url: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a ``data:<type>;base64,<data>`` URL."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")], data


def _text_part(p: dict[str, Any]) -> dict[str, Any]:
    doc = ext(p).get("document")
    text = p.get("text")
    text = text if isinstance(text, str) else ""
    if isinstance(doc, dict):
        block = {"type": "document",
                 "source": {"type": "text", "media_type": "text/plain", "data": text}}
        block.update({k: v for k, v in doc.items() if k in ("title", "context", "citations")})
        return _cc(block, p)
    return _cc({"type": "text", "text": text}, p)


def _image_part(p: dict[str, Any], path: str) -> dict[str, Any]:
    image = p.get("image_url")
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise bad(f"{path}.image_url.url", "Input should be a string")
    data = _data_url(url)
    source = ({"type": "base64", "media_type": data[0], "data": data[1]} if data
              else {"type": "url", "url": url})
    return _cc({"type": "image", "source": source}, p)


def _file_part(p: dict[str, Any], path: str) -> dict[str, Any]:
    f = p.get("file")
    f = f if isinstance(f, dict) else {}
    fd = f.get("file_data")
    data = _data_url(fd) if isinstance(fd, str) else None
    if data is None or data[0] != "application/pdf":
        raise bad(f"{path}.file", "only PDF files given inline as file_data "
                  "(data:application/pdf;base64,...) can go to this backend",
                  code="unsupported_content")
    block: dict[str, Any] = {"type": "document", "source": {
        "type": "base64", "media_type": "application/pdf", "data": data[1]}}
    doc = ext(p).get("document")
    if isinstance(doc, dict):
        block.update({k: v for k, v in doc.items() if k in ("title", "context", "citations")})
    else:
        name = f.get("filename")
        if isinstance(name, str) and name and name != "document.pdf":
            block["title"] = name
    return _cc(block, p)


Attached = list[tuple[str, dict[str, Any]]]


def _user_blocks(content: Any, path: str) -> tuple[list[dict[str, Any]] | str, Attached]:
    """The user message's blocks, and apart from them the images that belong in a tool
    result (``x_anthropic.tool_result``: the call's id)."""
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        return "", []
    out = []
    attached: Attached = []
    for j, p in enumerate(content):
        ppath = f"{path}.content[{j}]"
        if not isinstance(p, dict):
            raise bad(ppath, "Input should be an object")
        kind = p.get("type")
        if kind == "text":
            out.append(_text_part(p))
        elif kind == "image_url":
            block = _image_part(p, ppath)
            owner = ext(p).get("tool_result")
            if isinstance(owner, str):
                attached.append((owner, block))
            else:
                out.append(block)
        elif kind == "file":
            out.append(_file_part(p, ppath))
        else:
            raise bad(f"{ppath}.type", f"a '{kind}' part cannot go to this backend",
                      code="unsupported_content")
    return out, attached


def _attach(out: list[dict[str, Any]], attached: Attached) -> list[dict[str, Any]]:
    """Puts each image back into its tool result in the user message just before;
    those whose result is not there are returned."""
    results: dict[Any, dict[str, Any]] = {}
    if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
        results = {b.get("tool_use_id"): b for b in out[-1]["content"]
                   if b.get("type") == "tool_result"}
    left = []
    for call_id, block in attached:
        result = results.get(call_id)
        if result is None:
            left.append(block)
            continue
        inner = result.get("content")
        blocks = inner if isinstance(inner, list) else _as_blocks(inner or "")
        result["content"] = [*blocks, block]
    return left


def _assistant_blocks(m: dict[str, Any]) -> list[dict[str, Any]] | str:
    x = ext(m)
    thinking = x.get("thinking_blocks")
    blocks: list[dict[str, Any]] = [b for b in thinking if isinstance(b, dict)] \
        if isinstance(thinking, list) else []
    content = m.get("content")
    calls = m.get("tool_calls")
    calls = calls if isinstance(calls, list) else []
    if isinstance(content, str) and not blocks and not calls:
        return content
    if isinstance(content, list):
        blocks.extend(_cc({"type": "text", "text": p["text"]}, p) for p in content
                      if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"])
    else:
        text = message_text(content)
        if text:
            blocks.append({"type": "text", "text": text})
    call_cc = x.get("tool_call_cache_control")
    call_cc = call_cc if isinstance(call_cc, dict) else {}
    for call in calls:
        if not isinstance(call, dict):
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        block = {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"),
                 "input": tool_input(fn.get("arguments"))}
        if isinstance(call_cc.get(call.get("id")), dict):
            block["cache_control"] = call_cc[call.get("id")]
        blocks.append(block)
    return blocks


def _tool_result(m: dict[str, Any]) -> dict[str, Any]:
    x = ext(m)
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                             "content": message_text(m.get("content"))}
    if x.get("is_error") is True:
        block["is_error"] = True
    return _cc(block, m)


def _as_blocks(content: list[dict[str, Any]] | str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return content


def _system(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    if not parts:
        return None
    if len(parts) == 1 and isinstance(parts[0].get("content"), str) and not ext(parts[0]):
        text: str = parts[0]["content"]
        return text
    blocks: list[dict[str, Any]] = []
    for m in parts:
        content = m.get("content")
        if isinstance(content, list):
            blocks.extend(_cc({"type": "text", "text": p["text"]}, p) for p in content
                          if isinstance(p, dict) and isinstance(p.get("text"), str))
        elif isinstance(content, str) and content:
            blocks.append(_cc({"type": "text", "text": content}, m))
    return blocks


def _messages(messages: Any) -> tuple[list[dict[str, Any]], str | list[dict[str, Any]] | None]:
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages if isinstance(messages, list) else []):
        path = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad(path, "Input should be an object")
        role = m.get("role")
        content: list[dict[str, Any]] | str
        if role in ("system", "developer"):
            system.append(m)
            continue
        if role == "tool":
            role, content = "user", [_tool_result(m)]
        elif role == "user":
            content, attached = _user_blocks(m.get("content"), path)
            if attached:
                left = _attach(out, attached)
                content = [*left, *_as_blocks(content)] if left else content
        elif role == "assistant":
            content = _assistant_blocks(m)
        else:
            raise bad(f"{path}.role", f"the role '{role}' cannot go to this backend")
        if out and out[-1]["role"] == role:
            merged = _as_blocks(out[-1]["content"]) + _as_blocks(content)
            # Anthropic wants a user message's tool results before anything else
            merged.sort(key=lambda b: b.get("type") != "tool_result")
            out[-1]["content"] = merged
        else:
            out.append({"role": role, "content": content})
    return out, _system(system)


def _thinking(body: dict[str, Any], max_tokens: int) -> dict[str, Any] | None:
    kept = ext(body).get("thinking")
    if isinstance(kept, dict):
        return kept
    effort = body.get("reasoning_effort")
    budget = THINKING_BUDGETS.get(effort) if isinstance(effort, str) else None
    if budget is None:
        return None
    budget = min(budget, max_tokens - 1)
    if budget < MIN_THINKING_BUDGET:
        return None
    return {"type": "enabled", "budget_tokens": budget}


def _tools(tools: Any) -> list[dict[str, Any]]:
    out = []
    for i, t in enumerate(tools if isinstance(tools, list) else []):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(t, dict) or t.get("type", "function") != "function" \
                or not isinstance(fn, dict):
            raise bad(f"tools[{i}].type", "only function tools can go to this backend",
                      code="unsupported_tool")
        params = fn.get("parameters")
        tool: dict[str, Any] = {"name": fn.get("name")}
        if isinstance(fn.get("description"), str):
            tool["description"] = fn["description"]
        tool["input_schema"] = params if isinstance(params, dict) \
            else {"type": "object", "properties": {}}
        out.append(_cc(tool, t))
    return out


def _tool_choice(body: dict[str, Any]) -> dict[str, Any] | None:
    tc = body.get("tool_choice")
    choice: dict[str, Any] | None = None
    if tc == "auto":
        choice = {"type": "auto"}
    elif tc == "required":
        choice = {"type": "any"}
    elif tc == "none":
        return {"type": "none"}
    elif isinstance(tc, dict):
        fn = tc.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            choice = {"type": "tool", "name": fn["name"]}
    if body.get("parallel_tool_calls") is False and body.get("tools"):
        choice = choice or {"type": "auto"}
        choice["disable_parallel_tool_use"] = True
    return choice


def to_messages_request(body: dict[str, Any], *, default_max_tokens: int) -> dict[str, Any]:
    """The Messages request body for a canonical chat body."""
    messages, system = _messages(body.get("messages"))
    max_tokens = body.get("max_tokens")
    if not is_int(max_tokens):
        max_tokens = body.get("max_completion_tokens")
    if not is_int(max_tokens) or max_tokens < 1:
        max_tokens = default_max_tokens
    out: dict[str, Any] = {"model": body.get("model"), "max_tokens": max_tokens}
    if system is not None:
        out["system"] = system
    out["messages"] = messages
    for key in ("temperature", "top_p"):
        v = body.get(key)
        if is_number(v):
            out[key] = min(v, 1)
    if is_int(body.get("top_k")):
        out["top_k"] = body["top_k"]
    stop = body.get("stop")
    if isinstance(stop, str):
        out["stop_sequences"] = [stop]
    elif isinstance(stop, list) and stop:
        out["stop_sequences"] = [s for s in stop if isinstance(s, str)]
    if isinstance(body.get("stream"), bool):
        out["stream"] = body["stream"]
    if isinstance(body.get("user"), str) and body["user"]:
        out["metadata"] = {"user_id": body["user"]}
    if body.get("tools"):
        out["tools"] = _tools(body["tools"])
    choice = _tool_choice(body)
    if choice is not None:
        out["tool_choice"] = choice
    thinking = _thinking(body, max_tokens)
    if thinking is not None:
        out["thinking"] = thinking
    fields = ext(body).get("fields")
    if isinstance(fields, dict):  # only the fields request.py carries, never others
        out.update({k: v for k, v in fields.items() if k in CARRIED and k not in out})
    return out
