"""Which requests a cache may serve and fill: the section's defaults, overridden by
the first rule that matches the request's tenant, app and model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenplane.config.cache_schema import CacheConfig, CacheRule


@dataclass(frozen=True, slots=True)
class CacheDecision:
    exact: bool
    semantic: bool
    threshold: float


def deterministic(body: dict[str, Any]) -> bool:
    """``temperature: 0`` or a ``seed`` (and one choice): the same request gives the same
    answer, so a cached one is what the model would say."""
    if body.get("n") not in (None, 1):
        return False
    seed = body.get("seed")
    temperature = body.get("temperature")
    return (seed is not None and not isinstance(seed, bool)) or temperature == 0


class CachePolicy:
    def __init__(self, config: CacheConfig) -> None:
        self.config = config

    def _rule(self, tenant: str, app: str, model: str) -> CacheRule | None:
        for r in self.config.rules:
            if (r.tenant in (None, tenant) and r.app in (None, app)
                    and r.model in (None, model)):
                return r
        return None

    def decide(self, tenant: str, app: str, model: str, body: dict[str, Any]
               ) -> CacheDecision:
        cfg = self.config
        rule = self._rule(tenant, app, model)
        exact = cfg.exact.enabled
        semantic = cfg.semantic.enabled
        loose = cfg.exact.nondeterministic
        loose_semantic = cfg.semantic.nondeterministic
        threshold = cfg.semantic.threshold
        if rule is not None:
            exact = exact if rule.exact is None else rule.exact
            semantic = semantic if rule.semantic is None else rule.semantic
            if rule.nondeterministic is not None:  # a rule opts both in (or out)
                loose = loose_semantic = rule.nondeterministic
            threshold = threshold if rule.threshold is None else rule.threshold
        if not cfg.enabled:
            return CacheDecision(False, False, threshold)
        # the same rule for both: a sampled answer is one of many, whether it is
        # found by its exact key or by a question that means the same
        sure = deterministic(body)
        semantic = semantic and (loose_semantic or sure)
        exact = exact and (loose or sure)
        return CacheDecision(exact, semantic, threshold)
