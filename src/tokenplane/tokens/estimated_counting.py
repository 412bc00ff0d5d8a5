"""Prompt counting for a model whose tokenizer is unknown: the calibrated estimator.

The estimate is split by source (system / history / context / tools / user) from the
features of each source's text; the model's fitted bias (per-request framing) goes to
the current user turn. The features of the whole prompt travel with the result, so the
meter finisher can calibrate the estimator with the upstream's reported count without
looking at the text again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenplane.tokens.counter import CountResult
from tokenplane.tokens.counts import TokenCounts
from tokenplane.tokens.estimator import FEATURES, Estimator, text_features
from tokenplane.tokens.messages import normalize
from tokenplane.tokens.segments import SegmentCache

ESTIMATED_FLAG = "input_estimated"
SOURCES = ("system", "history", "context", "tools", "user")
Features = dict[str, int]


@dataclass(slots=True)
class EstimatedCount(CountResult):
    """A :class:`CountResult` made by the estimator; ``features`` of the whole prompt."""

    features: Features = field(default_factory=dict)


def _add(into: Features, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        if v:
            into[k] = into.get(k, 0) + v


class EstimatingCounter:
    """Counts one alias's requests with the shared :class:`Estimator`."""

    def __init__(self, alias: str, estimator: Estimator, cache: SegmentCache) -> None:
        self.alias = alias
        self.estimator = estimator
        self.cache = cache

    def _split(self, by_source: Mapping[str, Features]) -> tuple[TokenCounts, Features]:
        total: Features = {}
        for feats in by_source.values():
            _add(total, feats)
        weights = self.estimator.weights(self.alias)
        estimate = self.estimator.estimate_features(self.alias, total)
        parts = {
            src: max(0, round(sum(weights[f] * feats.get(f, 0) for f in FEATURES)))
            for src, feats in by_source.items()
        }
        counts = TokenCounts(**{s: parts.get(s, 0) for s in SOURCES if s != "user"})
        counts.user = max(0, estimate - counts.prompt)
        return counts, total

    def count_chat(
        self, messages: Sequence[Mapping[str, Any]], tools: Any = None
    ) -> EstimatedCount:
        conv = normalize(messages)
        by_source: dict[str, Features] = {s: {} for s in SOURCES}
        for m in conv.messages:
            text = m.content
            if m.tool_calls:
                text += "".join(c.name + c.arguments for c in m.tool_calls)
            _add(by_source[m.source], text_features(text))
        if tools:
            _add(by_source["tools"], text_features(json.dumps(tools, ensure_ascii=False)))
        counts, total = self._split(by_source)
        system_text = "\n\n".join(m.content for m in conv.messages if m.source == "system")
        fp = self.cache.fingerprint(system_text) if system_text else None
        return EstimatedCount(counts, [], fp, False, frozenset({ESTIMATED_FLAG}), total)

    def count_texts(self, items: Sequence[Any]) -> EstimatedCount:
        """A completion prompt or embedding input: strings and/or token id lists."""
        feats: Features = {}
        ids = 0
        for item in items:
            if isinstance(item, str):
                _add(feats, text_features(item))
            elif isinstance(item, int):
                ids += 1
            elif isinstance(item, list):
                ids += len(item)
        counts, total = self._split({"user": feats})
        counts.user += ids
        # token ids are not text: such a prompt cannot calibrate the estimator
        return EstimatedCount(counts, [], None, False, frozenset({ESTIMATED_FLAG}),
                              {} if ids else total)

    def count_text(self, text: str) -> int:
        return self.estimator.estimate(self.alias, text)
