"""Plugins registered by name, and routing profiles built from config dicts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tokenplane.routing.filters import (
    HealthyFilter,
    ModelVersionFilter,
    PoolFilter,
    UnsaturatedFilter,
)
from tokenplane.routing.pickers import (
    MaxScorePicker,
    MaxScoreRoundRobinPicker,
    RandomPicker,
    RoundRobinPicker,
    SglangCacheAwarePicker,
)
from tokenplane.routing.plugins import Filter, Picker, RoutingContext, Scorer
from tokenplane.routing.prefix_scorers import PrefixAffinityScorer, StickyUntilSaturatedScorer
from tokenplane.routing.profile import RoutingProfile
from tokenplane.routing.scorers import (
    CostScorer,
    KvCacheScorer,
    OutstandingRequestsScorer,
    QueueDepthScorer,
    SessionAffinityScorer,
    TokenLoadScorer,
)

Params = Mapping[str, Any]
FilterFactory = Callable[[Params, RoutingContext], Filter]
ScorerFactory = Callable[[Params, RoutingContext], Scorer]
PickerFactory = Callable[[Params, RoutingContext], Picker]


class PluginRegistry:
    """Name -> factory maps for filters, scorers and pickers."""

    def __init__(self) -> None:
        self.filters: dict[str, FilterFactory] = {}
        self.scorers: dict[str, ScorerFactory] = {}
        self.pickers: dict[str, PickerFactory] = {}

    def add_filter(self, name: str, factory: FilterFactory) -> None:
        self.filters[name] = factory

    def add_scorer(self, name: str, factory: ScorerFactory) -> None:
        self.scorers[name] = factory

    def add_picker(self, name: str, factory: PickerFactory) -> None:
        self.pickers[name] = factory

    def build_profile(self, config: Mapping[str, Any], ctx: RoutingContext) -> RoutingProfile:
        """Build a profile from ``{"name", "filters", "scorers", "picker"}``.

        Each plugin entry is a name or a mapping with ``name`` (and ``weight``
        for scorers, default 1.0) plus the plugin's own parameters.
        """
        filters = [
            _lookup(self.filters, "filter", name)(params, ctx)
            for name, params in (_entry(x) for x in config.get("filters", ()))
        ]
        scorers: list[tuple[Scorer, float]] = []
        for raw in config.get("scorers", ()):
            name, params = _entry(raw)
            weight = float(params.get("weight", 1.0))
            rest = {k: v for k, v in params.items() if k != "weight"}
            scorers.append((_lookup(self.scorers, "scorer", name)(rest, ctx), weight))
        pname, pparams = _entry(config.get("picker", "max_score"))
        picker = _lookup(self.pickers, "picker", pname)(pparams, ctx)
        return RoutingProfile(
            name=str(config.get("name", "custom")),
            filters=filters,
            scorers=scorers,
            picker=picker,
            ctx=ctx,
        )


def _entry(raw: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(raw, str):
        return raw, {}
    if isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
        return str(raw["name"]), {k: v for k, v in raw.items() if k != "name"}
    raise ValueError(f"plugin entry must be a name or a mapping with 'name': {raw!r}")


def _lookup(table: Mapping[str, Any], kind: str, name: str) -> Any:
    try:
        return table[name]
    except KeyError:
        known = ", ".join(sorted(table))
        raise ValueError(f"unknown {kind} {name!r}; known: {known}") from None


def default_registry() -> PluginRegistry:
    """A registry holding every built-in plugin."""
    r = PluginRegistry()
    r.add_filter("healthy", lambda p, c: HealthyFilter())
    r.add_filter("pool", lambda p, c: PoolFilter())
    r.add_filter("model_version", lambda p, c: ModelVersionFilter())
    r.add_filter("unsaturated", lambda p, c: UnsaturatedFilter(float(p.get("kv_limit", 0.9))))
    r.add_scorer("queue_depth", lambda p, c: QueueDepthScorer())
    r.add_scorer("outstanding_requests", lambda p, c: OutstandingRequestsScorer())
    r.add_scorer("kv_cache", lambda p, c: KvCacheScorer())
    r.add_scorer("token_load", lambda p, c: TokenLoadScorer())
    r.add_scorer("session_affinity", lambda p, c: SessionAffinityScorer(c))
    r.add_scorer("cost", lambda p, c: CostScorer())
    r.add_scorer("prefix_affinity", lambda p, c: PrefixAffinityScorer(c))
    r.add_scorer(
        "sticky_until_saturated",
        lambda p, c: StickyUntilSaturatedScorer(
            c, float(p.get("floor_s", 0.005)), float(p.get("cache_weight", 1.0))
        ),
    )
    r.add_picker("max_score", lambda p, c: MaxScorePicker(c))
    r.add_picker("max_score_rr", lambda p, c: MaxScoreRoundRobinPicker())
    r.add_picker("random", lambda p, c: RandomPicker(c))
    r.add_picker("round_robin", lambda p, c: RoundRobinPicker())
    r.add_picker(
        "sglang_cache_aware",
        lambda p, c: SglangCacheAwarePicker(
            c,
            balance_abs_threshold=int(p.get("balance_abs_threshold", 64)),
            balance_rel_threshold=float(p.get("balance_rel_threshold", 1.5)),
            cache_threshold=float(p.get("cache_threshold", 0.3)),
        ),
    )
    return r
