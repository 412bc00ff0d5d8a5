"""History trimming on overflow (``on_overflow: trim_history``, docs/CONTEXT.md).

The messages are cut into units that are kept or dropped whole: an assistant message
that calls tools together with the tool results that answer it (by ``tool_call_id``,
else the tool messages right after it), and every other message on its own. Always
kept: system and developer messages, pinned messages (the gateway marks them from
``"tokenplane": {"pinned": true}`` on the message), and the current turn (the last
user message and everything after it). Of the rest, the newest units are kept: the
most of them whose prompt, counted exactly by ``count`` (the model's chat template
and tokenizer), is at most ``limit``. Adding a message never lowers a prompt's count,
so the number kept is found by bisection, in about log2(units) counts, and the
result is exact: the trimmed prompt fits, the same prompt with the next older unit
does not.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Message = Mapping[str, Any]
KEPT_ROLES = frozenset({"system", "developer"})


class CannotFit(Exception):
    """What must be kept (system, pinned, the current turn) is already over the limit."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"the messages that are always kept have {tokens} tokens, "
                         f"over {limit}")
        self.tokens = tokens
        self.limit = limit


@dataclass(slots=True)
class Trimmed:
    messages: list[Message]
    tokens: int  # the trimmed prompt's count
    dropped: list[int] = field(default_factory=list)  # indices of the dropped messages
    dropped_tokens: int = 0  # the original prompt's count less the trimmed one's


def units(messages: Sequence[Message]) -> list[list[int]]:
    """Message indices grouped into units that are kept or dropped whole."""
    out: list[list[int]] = []
    open_calls: dict[str, list[int]] = {}  # tool_call_id -> the unit that made it
    last_caller: list[int] | None = None
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            unit = [i]
            out.append(unit)
            last_caller = unit
            for call in m.get("tool_calls") or ():
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    open_calls[call["id"]] = unit
            continue
        if role in ("tool", "function"):
            call_id = m.get("tool_call_id")
            owner = open_calls.get(call_id) if isinstance(call_id, str) else None
            if owner is None and not isinstance(call_id, str):
                owner = last_caller  # no id: the tool messages right after the call
            if owner is not None:
                owner.append(i)
                continue
            out.append([i])
            continue
        last_caller = None
        out.append([i])
    return out


def split_units(messages: Sequence[Message], pinned: Collection[int] = ()
                ) -> tuple[list[list[int]], list[list[int]]]:
    """The units always kept (system, pinned, the current turn) and the droppable ones,
    oldest first."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"),
                    default=len(messages) - 1)
    always: list[list[int]] = []
    droppable: list[list[int]] = []
    for unit in units(messages):
        keep = any(i >= last_user or i in pinned or messages[i].get("role") in KEPT_ROLES
                   for i in unit)
        (always if keep else droppable).append(unit)
    return always, droppable


def always_kept(messages: Sequence[Message], pinned: Collection[int] = ()) -> list[Message]:
    """The messages trimming never drops, in order."""
    always, _ = split_units(messages, pinned)
    return [messages[i] for i in sorted(i for u in always for i in u)]


def trim_history(messages: Sequence[Message], count: Callable[[list[Message]], int],
                 limit: int, pinned: Collection[int] = ()) -> Trimmed:
    """The messages trimmed to at most ``limit`` tokens (see module doc)."""
    total = count(list(messages))
    if total <= limit:
        return Trimmed(list(messages), total)
    always, droppable = split_units(messages, pinned)

    def build(k: int) -> list[int]:
        """The indices kept when the ``k`` newest droppable units are."""
        kept = [i for u in always for i in u]
        for u in droppable[len(droppable) - k:] if k else ():
            kept.extend(u)
        return sorted(kept)

    def tokens(k: int) -> int:
        return count([messages[i] for i in build(k)])

    lo, hi = 0, len(droppable)
    best = tokens(0)
    if best > limit:
        raise CannotFit(best, limit)
    while lo < hi:  # the largest k whose prompt fits
        mid = (lo + hi + 1) // 2
        n = tokens(mid)
        if n <= limit:
            lo, best = mid, n
        else:
            hi = mid - 1
    kept = build(lo)
    kept_set = set(kept)
    dropped = [i for i in range(len(messages)) if i not in kept_set]
    return Trimmed([messages[i] for i in kept], best, dropped, total - best)
