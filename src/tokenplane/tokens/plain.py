"""The text runs of a *plain* chat request, per template family, without building pieces.

Most requests are plain: no tools, and every message a ``dict`` holding exactly a string
``role`` (not ``tool`` / ``function``) and a string ``content``. For those each family's
template frames every message with a fixed number of special ids around one or two text
runs, so the counter (:meth:`~tokenplane.tokens.counter.ChatCounter.count`) can count the
runs directly instead of normalising the messages and walking
:meth:`~tokenplane.tokens.template_base.ChatTemplate.pieces`. A :class:`PlainShape` gives,
for a plain conversation, the runs in prompt order, exactly as the family's ``pieces``
would group them (the tests check both against each other), as a :data:`Plan`;
:func:`plain_shape` returns None for templates it does not know (they use the general
path).

Runs made only of the family's fixed texts (role names, newlines, the generation prompt,
Qwen's default system prompt) are counted once, when the shape is built: the plan holds
their segments ready (reported as cached), so only the messages' own texts reach the
segment cache.

Sources are indices into :data:`SOURCES`. A plain message's source is ``system`` for the
roles ``system`` / ``developer``, ``user`` for the last ``user`` message, else ``history``.
"""

from __future__ import annotations

from tokenplane.tokens.segments import SegmentInfo
from tokenplane.tokens.template_base import ChatTemplate
from tokenplane.tokens.template_chatml import ChatMLTemplate, Qwen3Template, QwenTemplate
from tokenplane.tokens.template_deepseek import ASSISTANT, BOS, EOS, USER, DeepSeekTemplate
from tokenplane.tokens.template_llama3 import (
    BEGIN_OF_TEXT,
    END_HEADER,
    EOT,
    START_HEADER,
    Llama3Template,
)
from tokenplane.tokens.template_openai import IM_END, IM_SEP, IM_START, OpenAITemplate

SOURCES = ("system", "history", "context", "tools", "user")
SYSTEM, HISTORY, CONTEXT, TOOLS, USER_TURN = range(5)
SYSTEM_ROLES = frozenset({"system", "developer"})
NOT_PLAIN_ROLES = frozenset({"tool", "function"})
COMMON_ROLES = ("system", "developer", "user", "assistant")

# (tokens per source so far: framing ids and fixed runs; the runs in prompt order: a fixed
# run's segment, or the source of the next text to count; the texts to count, non-empty)
Plan = tuple[list[int], list[SegmentInfo | int], list[str]]


class PlainShape:
    """How one template frames plain conversations: :meth:`plan` gives their runs."""

    def __init__(self, template: ChatTemplate, fixed_texts: tuple[str, ...]) -> None:
        self.template = template
        counts = {t: template.tokenizer.count(t) for t in fixed_texts if t}
        # ``fixed[source][text]``: the segment of a run made of that fixed text
        self.fixed: list[dict[str, SegmentInfo]] = [
            {t: SegmentInfo(name, n, len(t), True) for t, n in counts.items()} for name in SOURCES
        ]

    def ids_len(self, label: str, fallback: int | None = None) -> int:
        """How many ids a framing token takes (the same for every source)."""
        return len(self.template.special("user", label, fallback).ids)

    def plan(self, roles: list[str], contents: list[str], sources: list[int]) -> Plan:
        """The runs of the plain conversation ``roles`` / ``contents`` / ``sources``."""
        raise NotImplementedError


class OpenAIShape(PlainShape):
    """``<|im_start|>`` role ``<|im_sep|>`` content ``<|im_end|>``; then the priming."""

    def __init__(self, template: ChatTemplate) -> None:
        super().__init__(template, COMMON_ROLES)
        self.frame = (
            self.ids_len("<|im_start|>", IM_START)
            + self.ids_len("<|im_sep|>", IM_SEP)
            + self.ids_len("<|im_end|>", IM_END)
        )
        self.priming = self.fixed[USER_TURN]["assistant"]
        self.priming_ids = (
            self.ids_len("<|im_start|>", IM_START) + self.ids_len("<|im_sep|>", IM_SEP)
        )

    def plan(self, roles: list[str], contents: list[str], sources: list[int]) -> Plan:
        ids = [0, 0, 0, 0, 0]
        plan: list[SegmentInfo | int] = []
        texts: list[str] = []
        fixed = self.fixed
        frame = self.frame
        for role, content, s in zip(roles, contents, sources, strict=True):
            ids[s] += frame
            seg = fixed[s].get(role)
            if seg is not None:
                plan.append(seg)
                ids[s] += seg.tokens
            elif role:
                plan.append(s)
                texts.append(role)
            if content:
                plan.append(s)
                texts.append(content)
        plan.append(self.priming)
        ids[USER_TURN] += self.priming_ids + self.priming.tokens
        return ids, plan, texts


class ChatMLShape(PlainShape):
    """``<|im_start|>`` role\n content ``<|im_end|>`` \n, a default system block first
    (Qwen2.5) when the conversation does not open with a system message."""

    def __init__(self, template: ChatMLTemplate) -> None:
        default = template.default_system
        self.default = None if default is None else "system\n" + default
        super().__init__(template, ("\n", "assistant\n", self.default or ""))
        self.frame = self.ids_len("<|im_start|>") + self.ids_len("<|im_end|>")
        self.newline = [f["\n"] for f in self.fixed]
        self.priming = self.fixed[USER_TURN]["assistant\n"]
        self.priming_ids = self.ids_len("<|im_start|>")

    def plan(self, roles: list[str], contents: list[str], sources: list[int]) -> Plan:
        ids = [0, 0, 0, 0, 0]
        plan: list[SegmentInfo | int] = []
        texts: list[str] = []
        frame = self.frame
        newline = self.newline
        if self.default is not None and (not roles or roles[0] != "system"):
            seg = self.fixed[SYSTEM][self.default]
            plan += (seg, newline[SYSTEM])
            ids[SYSTEM] += frame + seg.tokens + newline[SYSTEM].tokens
        for role, content, s in zip(roles, contents, sources, strict=True):
            nl = newline[s]
            ids[s] += frame + nl.tokens
            plan += (s, nl)
            texts.append(role + "\n" + content)
        plan.append(self.priming)
        ids[USER_TURN] += self.priming_ids + self.priming.tokens
        return ids, plan, texts


class Llama3Shape(PlainShape):
    """``<|begin_of_text|>``, then headers around the role and ``\n\n`` + trimmed content."""

    def __init__(self, template: ChatTemplate) -> None:
        super().__init__(template, (*COMMON_ROLES, "\n\n"))
        self.bos = self.ids_len("<|begin_of_text|>", BEGIN_OF_TEXT)
        self.header = self.ids_len("<|start_header_id|>", START_HEADER) + self.ids_len(
            "<|end_header_id|>", END_HEADER
        )
        self.frame = self.header + self.ids_len("<|eot_id|>", EOT)
        self.priming = (self.fixed[USER_TURN]["assistant"], self.fixed[USER_TURN]["\n\n"])

    def plan(self, roles: list[str], contents: list[str], sources: list[int]) -> Plan:
        ids = [self.bos, 0, 0, 0, 0]
        plan: list[SegmentInfo | int] = []
        texts: list[str] = []
        fixed = self.fixed
        frame = self.frame
        for role, content, s in zip(roles, contents, sources, strict=True):
            ids[s] += frame
            seg = fixed[s].get(role)
            if seg is not None:
                plan.append(seg)
                ids[s] += seg.tokens
            elif role:
                plan.append(s)
                texts.append(role)
            plan.append(s)
            texts.append("\n\n" + content.strip())
        plan += self.priming
        ids[USER_TURN] += self.header + self.priming[0].tokens + self.priming[1].tokens
        return ids, plan, texts


class DeepSeekShape(PlainShape):
    """BOS and every system prompt (joined by ``\n\n``) first, then user turns after
    ``<｜User｜>`` and assistant turns between ``<｜Assistant｜>`` and EOS; the priming."""

    def __init__(self, template: ChatTemplate) -> None:
        super().__init__(template, ())
        self.bos = self.ids_len(BOS)
        self.user = self.ids_len(USER)
        self.assistant = self.ids_len(ASSISTANT)
        self.reply = self.assistant + self.ids_len(EOS)

    def plan(self, roles: list[str], contents: list[str], sources: list[int]) -> Plan:
        ids = [self.bos, 0, 0, 0, 0]
        plan: list[SegmentInfo | int] = []
        texts: list[str] = []
        system = "\n\n".join([c for r, c in zip(roles, contents, strict=True) if r in SYSTEM_ROLES])
        if system:
            plan.append(SYSTEM)
            texts.append(system)
        for role, content, s in zip(roles, contents, sources, strict=True):
            if role in SYSTEM_ROLES:
                continue
            ids[s] += self.reply if role == "assistant" else self.user
            if content:
                plan.append(s)
                texts.append(content)
        ids[USER_TURN] += self.assistant
        return ids, plan, texts


def plain_shape(template: ChatTemplate) -> PlainShape | None:
    """The plain shape of ``template``'s family, or None (exact template classes only: a
    subclass may render differently)."""
    kind = type(template)
    if kind is OpenAITemplate:
        return OpenAIShape(template)
    if kind in (ChatMLTemplate, QwenTemplate, Qwen3Template):
        assert isinstance(template, ChatMLTemplate)
        return ChatMLShape(template)
    if kind is Llama3Template:
        return Llama3Shape(template)
    if kind is DeepSeekTemplate:
        return DeepSeekShape(template)
    return None
