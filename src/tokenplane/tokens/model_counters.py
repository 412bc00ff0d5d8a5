"""Per-alias prompt counting: the gateway's counter and the simulated engine's ground
truth come from the same chat template, so a sim replica's ``usage`` and the
gateway's count agree exactly.

An alias whose tokenizer is ``estimate``, or a model name no rule resolves, is counted
by the calibrated :class:`Estimator` (results flagged ``input_estimated``); a spec
(``kind:arg``) that cannot be loaded raises :class:`UnknownTokenizerError`;
the meter finisher calibrates it with the upstream's reported prompt counts. A
simulated replica of such an alias still needs real ids: it uses ``cl100k_base``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from tokenplane.config.schema import ModelConfig
from tokenplane.tokens.base import Tokenizer
from tokenplane.tokens.cached_splits import CachedSplits
from tokenplane.tokens.char_floor import char_floor
from tokenplane.tokens.counter import ChatCounter, CountResult
from tokenplane.tokens.counts import TokenCounts
from tokenplane.tokens.estimated_counting import EstimatingCounter
from tokenplane.tokens.estimator import Estimator
from tokenplane.tokens.floor_parts import FloorParts
from tokenplane.tokens.ids import check_token_ids, vocab_size
from tokenplane.tokens.prompt_batch import prompt_batch
from tokenplane.tokens.prompt_parts import PartCounter, PromptKind
from tokenplane.tokens.registry import (
    HFTokenizer,
    TiktokenTokenizer,
    TokenizerRegistry,
    UnknownTokenizerError,
)
from tokenplane.tokens.segments import SegmentCache
from tokenplane.tokens.space_splits import SplitCounting
from tokenplane.tokens.templates import make_template

log = logging.getLogger("tokenplane.tokens")
ESTIMATE = "estimate"
SIM_FALLBACK_SPEC = "tiktoken:cl100k_base"
_FAMILY_BY_KIND = {"tiktoken": "openai", "qwen": "qwen", "deepseek": "deepseek", "hf": "chatml"}


def normalize_spec(spec: str) -> str:
    """``cl100k_base`` -> ``tiktoken:cl100k_base``; full specs pass unchanged."""
    if ":" in spec or spec == "deepseek":
        return spec
    if spec.endswith("_base") or spec in ("gpt2",):
        return f"tiktoken:{spec}"
    if spec.lower().startswith("qwen"):
        return f"qwen:{spec.lower()}"
    return spec


def is_spec(spec: str) -> bool:
    """Whether a (normalized) tokenizer string is a spec (``kind:arg``, ``deepseek``)
    rather than a model name: a spec that cannot be loaded is refused, a model name
    with no rule is counted by the estimator."""
    return ":" in spec or spec == "deepseek"


def family_for(model: ModelConfig, spec: str) -> str:
    if model.chat_template:
        return model.chat_template
    return _FAMILY_BY_KIND.get(spec.partition(":")[0], "chatml")


class ExactParts:
    """Prompt parts counted with an alias's chat template and tokenizer."""

    __slots__ = ("counter",)

    def __init__(self, counter: ChatCounter) -> None:
        self.counter = counter

    def messages(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> CountResult:
        return self.counter.count(messages, tools)

    def _check_ids(self, value: Any, param: str) -> None:
        """Token ids beyond the vocabulary of an exact tokenizer are a client's mistake."""
        if not self.counter.exact or not isinstance(value, list):
            return
        vocab = vocab_size(self.counter.template.tokenizer)
        if vocab is None:
            return
        for item in value:
            if isinstance(item, list):
                check_token_ids(item, param, vocab)
            elif isinstance(item, int):
                check_token_ids([item], param, vocab)

    def prompt(self, prompt: Any) -> CountResult:
        self._check_ids(prompt, "prompt")
        return self.counter.count_prompt(prompt)

    def inputs(self, value: Any) -> CountResult:
        self._check_ids(value, "input")
        c = self.counter
        items = [value] if isinstance(value, str) else value
        total = 0
        for item in items:
            if isinstance(item, str):
                total += c.count_text(item)
            elif isinstance(item, int):
                total += 1
            elif isinstance(item, list):
                total += len(item)
        return CountResult(TokenCounts(user=total))


class EstimatedParts:
    """Prompt parts counted by the calibrated estimator (no usable tokenizer)."""

    __slots__ = ("est",)

    def __init__(self, est: EstimatingCounter) -> None:
        self.est = est

    def messages(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> CountResult:
        return self.est.count_chat(messages, tools)

    def prompt(self, prompt: Any) -> CountResult:
        result = self.est.count_texts([prompt] if isinstance(prompt, str) else prompt)
        batch = prompt_batch(prompt)
        if batch is not None and len(batch) > 1:
            est = self.est
            result.longest = max(est.count_text(p) if isinstance(p, str) else len(p)
                                 for p in batch)
        return result

    def inputs(self, value: Any) -> CountResult:
        return self.est.count_texts([value] if isinstance(value, str) else value)


class TemplateIds:
    """The engine's view of an alias: the full prompt ids of prompt parts."""

    __slots__ = ("template",)

    def __init__(self, counter: ChatCounter) -> None:
        self.template = counter.template

    def messages(self, messages: Sequence[Mapping[str, Any]], tools: Any) -> list[int]:
        return self.template.encode(messages, tools)

    def prompt(self, prompt: Any) -> list[int]:
        tokenizer = self.template.tokenizer
        if isinstance(prompt, str):
            return tokenizer.encode(prompt)
        out: list[int] = []
        for item in prompt:
            if isinstance(item, str):
                out.extend(tokenizer.encode(item))
            elif isinstance(item, int):
                out.append(item)
            else:
                out.extend(item)
        return out


class ModelCounters:
    """One :class:`ChatCounter` per alias, sharing a registry and a segment cache; an
    :class:`EstimatingCounter` for the aliases with no usable tokenizer."""

    def __init__(
        self, models: list[ModelConfig], registry: TokenizerRegistry | None = None,
        cache: SegmentCache | None = None, estimator: Estimator | None = None,
    ) -> None:
        self.registry = registry or TokenizerRegistry()
        self.cache = cache or SegmentCache()
        self.estimator = estimator or Estimator()
        self._by_alias: dict[str, ChatCounter] = {}
        self._estimated: dict[str, EstimatingCounter] = {}
        self._parts: dict[str, PartCounter] = {}  # what count() hands the operation
        self._floors: dict[str, FloorParts] = {}  # what floor() hands it (exact aliases)
        for m in models:
            counter = self._exact_counter(m)
            parts: PartCounter
            if counter is None:
                est = self._estimated[m.alias] = EstimatingCounter(m.alias, self.estimator,
                                                                   self.cache)
                parts = EstimatedParts(est)
                family = m.chat_template or "chatml"
                counter = ChatCounter(
                    make_template(family, self.registry.get(SIM_FALLBACK_SPEC)), self.cache,
                    exact=False,
                )
            else:
                parts = ExactParts(counter)
                floor = char_floor(counter.template.tokenizer)
                if floor is not None:
                    self._floors[m.alias] = FloorParts(counter.template, floor)
            self._by_alias[m.alias] = counter
            self._parts[m.alias] = parts

    def _exact_counter(self, m: ModelConfig) -> ChatCounter | None:
        """The real tokenizer's counter, or None when the alias must be estimated."""
        if m.tokenizer == ESTIMATE:
            return None
        spec = normalize_spec(m.tokenizer)
        try:
            return ChatCounter(make_template(family_for(m, spec), self.registry.get(spec)),
                               self.cache)
        except UnknownTokenizerError as first:
            rule = self.registry.resolve(m.tokenizer)  # perhaps a model name
            if rule is not None:
                try:
                    template = make_template(m.chat_template or rule.family,
                                             self.registry.get(rule.spec))
                    return ChatCounter(template, self.cache, rule.exact)
                except UnknownTokenizerError:
                    pass
            if is_spec(spec):  # a spec that cannot be loaded is a mistake, not a name
                raise
            log.warning("model %s: tokenizer %r unavailable (%s); counting with the "
                        "calibrated estimator", m.alias, m.tokenizer, first)
            return None

    def is_estimated(self, alias: str) -> bool:
        return alias in self._estimated

    @property
    def estimated_aliases(self) -> list[str]:
        return list(self._estimated)

    def counter(self, alias: str) -> ChatCounter:
        return self._by_alias[alias]

    def tokenizer(self, alias: str) -> Tokenizer:
        """The tokenizer of ``alias`` (for an estimated alias, the simulated engine's)."""
        return self._by_alias[alias].template.tokenizer

    def count(self, model: ModelConfig, operation: PromptKind, body: dict[str, Any]) -> CountResult:
        """The prompt of ``body`` counted by source: ``operation`` (the endpoint kind)
        says which parts of the body make the prompt."""
        return operation.count_prompt(self._parts[model.alias], body)

    def floor(self, model: ModelConfig, operation: PromptKind, body: dict[str, Any]
              ) -> int | None:
        """The fewest prompt tokens ``body`` can have, from its characters, without
        tokenizing (``tokens/char_floor.py``): never above what :meth:`count` gives.
        None where no such floor is known (estimated aliases, tokenizers that are not
        byte-level BPE) or the body's parts are malformed (counting will say so). A
        batch of prompts (completions): the floor of its longest prompt, what must fit
        the context window."""
        parts = self._floors.get(model.alias)
        if parts is None:
            return None
        try:
            result = operation.count_prompt(parts, body)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        # a batch of prompts: its longest one's floor (each prompt must fit the window)
        return result.counts.prompt if result.longest is None else result.longest

    def calibrate(self, alias: str, features: Mapping[str, int], reported_prompt: int) -> None:
        """Refine the estimator of ``alias`` with the upstream's reported prompt count."""
        if alias in self._estimated and features:
            self.estimator.observe(alias, features, reported_prompt)

    def floor_text(self, model: ModelConfig, text: str, above: int = -1) -> int:
        """The fewest tokens ``text`` can take for ``model``, without tokenizing it
        (never above :meth:`count_text`): the count itself when the segment cache holds
        it, else the tokenizer's ``token_floor`` where it has one (``TiktokenTokenizer``,
        ``tokens/piece_floor.py``; a cheaper one when it is over ``above``), else 0."""
        if model.alias in self._estimated:
            return 0
        tok = self._by_alias[model.alias].template.tokenizer
        known = self.cache.peek(tok, text)
        if known is not None:
            return known
        floor = getattr(tok, "token_floor", None)
        return int(floor(text, above)) if floor is not None else 0

    def joins(self, model: ModelConfig) -> SplitCounting | None:
        """The alias's tokenizer where its pre-tokens break at a context block's joins
        (``tokens/space_splits.py``), so the packer counts the block from its pieces'
        counts (``context/block_count.py``) and keeps it in the segment cache
        (``tokens/cached_splits.py``); None for an estimated alias or a tokenizer
        without that proof (the block is then counted)."""
        if model.alias in self._estimated:
            return None
        tok = self._by_alias[model.alias].template.tokenizer
        if isinstance(tok, TiktokenTokenizer | HFTokenizer) and tok.space_splits:
            return CachedSplits(tok, tok, self.cache)
        return None

    def count_text(self, model: ModelConfig, text: str) -> int:
        est = self._estimated.get(model.alias)
        if est is not None:
            return est.count_text(text)
        return self._by_alias[model.alias].count_text(text)

    def prompt_ids(self, alias: str) -> TemplateIds:
        """The engine's view: the full prompt ids of a request's prompt parts."""
        return TemplateIds(self._by_alias[alias])
