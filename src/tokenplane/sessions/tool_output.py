"""Tool-output growth: measure the tool results a step carries, flag the large ones
and the fast-growing context, and optionally shrink the results (pure: messages and a
tokenizer in, the measures and the new messages out).

* A **tool result** is a message with role ``tool`` (or the legacy ``function``); its
  size is the tokens of its content (the model's tokenizer, no template framing).
* The **tool-output tokens added** by a step are those of the tool results after the
  last assistant message: what the client appended since the previous step's answer.
* The **growth** of a step is the tokens of every message's content after the last
  assistant message (tool results and any new user text).

Over ``max_result_tokens`` a result is flagged ``tool_output_large``; over
``max_growth_tokens`` the step is flagged ``context_growth``. With ``action:
truncate`` every result over ``max_result_tokens`` is cut to exactly that many
tokens or fewer: its first ``head_share`` and its last tokens with the marker
between them (the marker counts). With ``keep_fields`` a JSON result keeps only the
named top-level fields (of the object, or of each object of a list), then is
truncated if still over. The policy looks at every result of the prompt, old ones
included, and shrinks each the same way at every step (the client resends what it
got from its tools, not what the gateway sent on), so the prompt's prefix, and the
upstream's prefix cache, stay stable from step to step. Growth alone only flags:
shrinking new results to a per-step share would cut the same result differently
once it is no longer new.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenplane.config.sessions_schema import ToolOutputConfig
from tokenplane.tokens.base import Tokenizer

TOOL_ROLES = frozenset({"tool", "function"})
FLAG_LARGE = "tool_output_large"
FLAG_GROWTH = "context_growth"
FLAG_TRUNCATED = "tool_output_truncated"
FALLBACK_MARKER = "[...]"


@dataclass(slots=True)
class ToolOutput:
    """What the policy measured and did to one request's messages."""

    messages: list[Any]  # the messages to send (the same list when nothing changed)
    tool_tokens: int = 0  # all tool results of the prompt (after the policy)
    added_tokens: int = 0  # tool results after the last assistant message (after)
    growth_tokens: int = 0  # every message after the last assistant message (before)
    largest_result: int = 0  # the largest tool result (before the policy)
    removed_tokens: int = 0  # what the policy took out
    results: int = 0  # tool results in the prompt
    flags: list[str] = field(default_factory=list)


def content_text(content: Any) -> str:
    """A message's text: a string, or its text parts joined with newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content
                         if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _last_assistant(messages: Sequence[Any]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "assistant":
            return i
    return -1


class CutCache:
    """The cuts already made, by (policy, result text): an agent resends every earlier
    result at each step, and cutting one means tokenizing it whole. Bounded by entries
    and by the characters held (least recently used dropped)."""

    def __init__(self, max_entries: int = 1024, max_chars: int = 32_000_000) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self.chars = 0
        self._cuts: OrderedDict[tuple[Any, ...], str] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> str | None:
        cut = self._cuts.get(key)
        if cut is not None:
            self._cuts.move_to_end(key)
        return cut

    def put(self, key: tuple[Any, ...], cut: str) -> None:
        size = len(key[-1]) + len(cut)
        if size > self.max_chars:
            return
        old = self._cuts.pop(key, None)
        if old is not None:
            self.chars -= len(key[-1]) + len(old)
        self._cuts[key] = cut
        self.chars += size
        while len(self._cuts) > self.max_entries or self.chars > self.max_chars:
            k, v = self._cuts.popitem(last=False)
            self.chars -= len(k[-1]) + len(v)


def apply_policy(messages: Sequence[Any], cfg: ToolOutputConfig, tokenizer: Tokenizer,
                 count: Callable[[str], int] | None = None,
                 cuts: CutCache | None = None) -> ToolOutput:
    """Measure, flag and (per ``cfg.action``) shrink the tool results of ``messages``;
    ``cuts`` remembers the cuts made (the same result is cut the same way)."""
    count = count or tokenizer.count
    cut = _last_assistant(messages)
    limit = cfg.max_result_tokens
    shrink = cfg.action != "flag" and limit is not None
    out = ToolOutput(list(messages))
    changed = False
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            continue
        text = content_text(m.get("content"))
        n = count(text) if text else 0
        if i > cut:
            out.growth_tokens += n
        if m.get("role") not in TOOL_ROLES:
            continue
        out.results += 1
        out.largest_result = max(out.largest_result, n)
        if shrink and limit is not None and n > limit:
            key = (tokenizer.name, limit, cfg.action, cfg.head_share, tuple(cfg.fields),
                   cfg.marker, text)
            new = cuts.get(key) if cuts is not None else None
            if new is None:
                new = shrink_result(text, limit, cfg, tokenizer, count)
                if cuts is not None:
                    cuts.put(key, new)
            after = count(new)
            out.removed_tokens += n - after
            out.messages[i] = {**m, "content": new}
            changed = True
            n = after
        out.tool_tokens += n
        if i > cut:
            out.added_tokens += n
    if limit is not None and out.largest_result > limit:
        out.flags.append(FLAG_LARGE)
    if cfg.max_growth_tokens is not None and out.growth_tokens > cfg.max_growth_tokens:
        out.flags.append(FLAG_GROWTH)
    if changed:
        out.flags.append(FLAG_TRUNCATED)
    else:
        out.messages = list(messages) if not isinstance(messages, list) else messages
    return out


def shrink_result(text: str, limit: int, cfg: ToolOutputConfig, tokenizer: Tokenizer,
                  count: Callable[[str], int]) -> str:
    """``text`` in at most ``limit`` tokens: its named JSON fields first
    (``keep_fields``), then its head and tail around the marker."""
    if cfg.action == "keep_fields":
        kept = keep_fields(text, cfg.fields)
        if kept is not None:
            if count(kept) <= limit:
                return kept
            text = kept
    return head_tail(text, limit, cfg.head_share, cfg.marker, tokenizer, count)


def keep_fields(text: str, names: Sequence[str]) -> str | None:
    """The JSON ``text`` with only the top-level fields ``names`` (of an object, or of
    each object of a list); None when it is not a JSON object or list."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    wanted = set(names)

    def pick(obj: Any) -> Any:
        return {k: v for k, v in obj.items() if k in wanted} if isinstance(obj, dict) else obj

    if isinstance(data, dict):
        data = pick(data)
    elif isinstance(data, list):
        data = [pick(x) for x in data]
    else:
        return None
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def head_tail(text: str, limit: int, head_share: float, marker: str, tokenizer: Tokenizer,
              count: Callable[[str], int]) -> str:
    """The first and last tokens of ``text`` around ``marker`` (``{dropped}`` in it
    becomes the number of tokens removed), at most ``limit`` tokens in all, as counted
    by ``count``; a marker that would take more than half of ``limit`` is replaced by
    ``[...]``. Cutting token ids may split a character; the result is re-counted and
    the kept part shortened until it fits, so the bound is exact."""
    ids = tokenizer.encode(text)
    n = len(ids)
    if n <= limit:
        return text
    used = count(_marker(marker, n))
    if used > limit // 2:
        marker, used = FALLBACK_MARKER, count(FALLBACK_MARKER)
    keep = max(0, limit - used)
    while True:
        head = int(keep * head_share)
        tail = keep - head
        result = (tokenizer.decode(ids[:head]) + _marker(marker, n - keep)
                  + (tokenizer.decode(ids[n - tail:]) if tail else ""))
        over = count(result) - limit
        if over <= 0:
            return result
        if keep == 0:
            return FALLBACK_MARKER if count(FALLBACK_MARKER) <= limit else ""
        keep = max(0, keep - over)


def _marker(template: str, dropped: int) -> str:
    return template.replace("{dropped}", str(dropped))
