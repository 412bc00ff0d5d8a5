"""Fast prompt counting by source, through the segment cache.

:class:`ChatCounter` walks the same pieces as :meth:`ChatTemplate.encode`, counting each
text run via :class:`SegmentCache` and each framing piece by its id count, so
``result.counts.prompt == len(template.encode(messages, tools))`` exactly. Framing tokens
count toward the message they frame; the generation prompt toward ``user``. See
:mod:`tokenplane.tokens.messages` for how messages are classified by source.

Plain requests (no tools; every message exactly a string ``role`` and ``content``) skip the
pieces: :mod:`tokenplane.tokens.plain` gives their runs directly, with the same counts,
segments and fingerprint as the general path (:meth:`ChatCounter.count_pieces`), except
that runs made only of the family's fixed texts (role names, newlines, the priming) are
counted once per counter and always report ``cached``.

:class:`TokenCounting` ties a registry, one shared segment cache and the per-model
counters together: ``TokenCounting(registry).for_model("qwen2.5-72b-instruct")``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tokenplane.tokens.counts import TokenCounts
from tokenplane.tokens.messages import DEFAULT_IMAGE_TOKENS, normalize
from tokenplane.tokens.plain import (
    HISTORY,
    NOT_PLAIN_ROLES,
    SOURCES,
    SYSTEM,
    SYSTEM_ROLES,
    USER_TURN,
    PlainShape,
    plain_shape,
)
from tokenplane.tokens.prompt_batch import prompt_batch
from tokenplane.tokens.registry import TokenizerRegistry
from tokenplane.tokens.segments import SegmentCache
from tokenplane.tokens.segments import SegmentInfo as SegmentInfo  # re-exported
from tokenplane.tokens.template_base import ChatTemplate, Tools
from tokenplane.tokens.templates import make_template

Prompt = str | Sequence[str] | Sequence[int] | Sequence[Sequence[int]]
NO_FLAGS: frozenset[str] = frozenset()


@dataclass(slots=True)
class CountResult:
    counts: TokenCounts
    segments: list[SegmentInfo] = field(default_factory=list)
    system_fingerprint: str | None = None
    exact: bool = True
    flags: frozenset[str] = frozenset()
    # a completions batch (several prompts): its longest prompt's tokens, what must fit
    # the context window (``counts`` holds the sum); None for one prompt
    longest: int | None = field(default=None, kw_only=True)

    @property
    def prompt_tokens(self) -> int:
        return self.counts.prompt


class ChatCounter:
    def __init__(self, template: ChatTemplate, cache: SegmentCache, exact: bool = True) -> None:
        self.template = template
        self.cache = cache
        self.exact = exact
        self.plain = plain_shape(template)

    @property
    def tokenizer_name(self) -> str:
        return self.template.tokenizer.name

    def count(self, messages: Sequence[Mapping[str, Any]], tools: Tools = None) -> CountResult:
        """Prompt tokens of a chat request, split by source (see module doc)."""
        shape = self.plain
        if shape is not None and not tools and type(messages) is list:
            result = self.count_plain(shape, messages)
            if result is not None:
                return result
        return self.count_pieces(messages, tools)

    def count_plain(self, shape: PlainShape, messages: list[Any]) -> CountResult | None:
        """:meth:`count_pieces` for a plain request (see :mod:`tokenplane.tokens.plain`),
        or None when the request is not plain. Runs made of the family's fixed texts are
        counted from the shape (as cache hits); the others go through the cache at once."""
        roles: list[str] = []
        contents: list[str] = []
        sources: list[int] = []
        system: list[str] = []
        last_user = -1
        for msg in messages:
            if type(msg) is not dict or len(msg) != 2:
                return None
            role = msg.get("role")
            content = msg.get("content")
            if type(role) is not str or type(content) is not str or role in NOT_PLAIN_ROLES:
                return None
            if role in SYSTEM_ROLES:
                sources.append(SYSTEM)
                system.append(content)
            else:
                if role == "user":
                    last_user = len(roles)
                sources.append(HISTORY)
            roles.append(role)
            contents.append(content)
        if last_user >= 0:
            sources[last_user] = USER_TURN
        by_source, plan, texts = shape.plan(roles, contents, sources)
        counts, hits = self.cache.lookup(self.template.tokenizer, texts) if texts else ([], [])
        segments: list[SegmentInfo] = []
        k = 0
        for item in plan:
            if isinstance(item, int):
                n = counts[k]
                segments.append(SegmentInfo(SOURCES[item], n, len(texts[k]), hits[k]))
                by_source[item] += n
                k += 1
            else:
                segments.append(item)
        self.cache.hits += len(plan) - k
        system_text = "\n\n".join(system)
        fp = self.cache.fingerprint(system_text) if system_text else None
        return CountResult(TokenCounts(*by_source), segments, fp, self.exact, NO_FLAGS)

    def count_pieces(
        self, messages: Sequence[Mapping[str, Any]], tools: Tools = None
    ) -> CountResult:
        """The general path: normalise, walk the template's pieces, count each run."""
        conv = normalize(messages)
        pieces = self.template.pieces(conv, tools)
        by_source: dict[str, int] = {"system": 0, "history": 0, "context": 0, "tools": 0, "user": 0}
        segments: list[SegmentInfo] = []
        texts: list[str] = []
        sources: list[str] = []
        tok = self.template.tokenizer
        measure = self.cache.measure

        def flush() -> None:
            entry, hit = measure(tok, tuple(texts))
            if len(sources) == 1:
                by_source[sources[0]] += entry.counts[0]
            else:
                for src, n in zip(sources, entry.counts, strict=True):
                    by_source[src] += n
            segments.append(SegmentInfo(sources[0], entry.total, entry.chars, hit))
            texts.clear()
            sources.clear()

        for p in pieces:
            if p.ids:
                if texts:
                    flush()
                by_source[p.source] += len(p.ids)
            elif p.text:
                texts.append(p.text)
                sources.append(p.source)
        if texts:
            flush()
        system_text = "\n\n".join(m.content for m in conv.messages if m.source == "system")
        fp = self.cache.fingerprint(system_text) if system_text else None
        counts = TokenCounts(**by_source)
        exact = self.exact and not conv.images
        return CountResult(counts, segments, fp, exact, frozenset(conv.flags))

    def count_prompt(self, prompt: Prompt) -> CountResult:
        """A plain completion prompt: a string, strings, token ids, or lists of ids."""
        if isinstance(prompt, str):
            return CountResult(TokenCounts(user=self.cache.count(self.template.tokenizer, prompt)))
        if prompt_batch(prompt) is None:  # one prompt of token ids
            return CountResult(TokenCounts(user=len(prompt)), exact=self.exact)
        total = longest = 0
        for item in prompt:
            n = self.cache.count(self.template.tokenizer, item) if isinstance(item, str) \
                else len(cast("Sequence[int]", item))
            total += n
            longest = max(longest, n)
        return CountResult(TokenCounts(user=total), exact=self.exact,
                           longest=longest if len(prompt) > 1 else None)

    def count_text(self, text: str) -> int:
        return self.cache.count(self.template.tokenizer, text)


class TokenCounting:
    """Registry + one shared segment cache + a lazily built counter per model."""

    def __init__(
        self,
        registry: TokenizerRegistry | None = None,
        cache: SegmentCache | None = None,
        image_tokens: int = DEFAULT_IMAGE_TOKENS,
        max_models: int = 1024,
    ) -> None:
        self.registry = registry if registry is not None else TokenizerRegistry()
        self.cache = cache if cache is not None else SegmentCache()
        self.image_tokens = image_tokens
        self.max_models = max_models
        self._counters: dict[str, ChatCounter | None] = {}

    def for_model(self, model: str) -> ChatCounter | None:
        """The counter for ``model``, or None when its tokenizer is unknown (estimate it)."""
        if model in self._counters:
            return self._counters[model]
        rule = self.registry.resolve(model)
        counter = None
        if rule is not None:
            template = make_template(rule.family, self.registry.get(rule.spec), self.image_tokens)
            counter = ChatCounter(template, self.cache, rule.exact)
        if len(self._counters) < self.max_models:  # client-chosen names must not grow memory
            self._counters[model] = counter
        return counter
