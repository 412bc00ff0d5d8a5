"""The named routing profiles: one table for the gateway config and the simulator.

``routing.profile: <name>`` (or ``routing.models.<alias>: <name>``) in the gateway
config and ``tokenplane simulate --policies <name>,...`` read the same table, so a
name means the same filters, scorers and picker in both. :data:`DEFAULT_PROFILE`
is what a gateway with no routing config runs. It was chosen by measurement
(docs/SIMULATION.md, "Which profile a gateway runs"): the former ``gateway``
profile (requests in flight 1.0, prefix affinity 0.6, session affinity 0.3, queue
depth 0.3, free KV 0.2) matched ``tokenplane`` on the Azure trace and lost on
Mooncake (prefix hit rate 0.11 against 0.17, goodput 5.5 against 6.1 req/s), so it
was removed; ``tokenplane`` took its round-robin tie break, which spreads an idle
cluster evenly. Baselines are the policies of other systems that the
simulator compares against; the simulator runs them without the gateway queue (as
those systems have none) and every other profile with it (as the gateway does by
default, ``scheduling.enabled: true``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tokenplane.routing.plugins import RoutingContext
from tokenplane.routing.profile import RoutingProfile
from tokenplane.routing.registry import PluginRegistry, default_registry

DEFAULT_PROFILE = "tokenplane"

_BASE_FILTERS = ("healthy", "pool", "model_version")


@dataclass(frozen=True, slots=True)
class NamedProfile:
    """A profile config dict under a name, with what it stands for."""

    name: str
    config: Mapping[str, Any]
    description: str
    baseline: bool = False  # another system's policy: simulated without the gateway queue


PROFILES: Mapping[str, NamedProfile] = MappingProxyType({
    p.name: p
    for p in (
        NamedProfile(
            "tokenplane",
            {
                "name": "tokenplane",
                "filters": _BASE_FILTERS,
                "scorers": [
                    {"name": "sticky_until_saturated", "weight": 1.0, "cache_weight": 8.0},
                    {"name": "prefix_affinity", "weight": 0.2},
                    {"name": "token_load", "weight": 0.1},
                    {"name": "kv_cache", "weight": 0.1},
                    {"name": "session_affinity", "weight": 0.2},
                ],
                "picker": "max_score_rr",
            },
            "sticky-until-saturated (estimated TTFT, cache weight 8), prefix affinity, "
            "token load, free KV cache, session affinity; ties round-robin",
        ),
        NamedProfile(
            "round-robin",
            {"name": "round-robin", "filters": _BASE_FILTERS, "picker": "round_robin"},
            "cycle through the replicas",
            baseline=True,
        ),
        NamedProfile(
            "random",
            {"name": "random", "filters": _BASE_FILTERS, "picker": "random"},
            "seeded random choice (a Kubernetes Service)",
            baseline=True,
        ),
        NamedProfile(
            "least-requests",
            {
                "name": "least-requests",
                "filters": _BASE_FILTERS,
                "scorers": [{"name": "outstanding_requests", "weight": 1.0}],
            },
            "fewest requests in flight (k8s / LiteLLM least-busy)",
            baseline=True,
        ),
        NamedProfile(
            "sglang-cache-aware",
            {
                "name": "sglang-cache-aware",
                "filters": _BASE_FILTERS,
                "picker": {
                    "name": "sglang_cache_aware",
                    "balance_abs_threshold": 64,
                    "balance_rel_threshold": 1.5,
                    "cache_threshold": 0.3,
                },
            },
            "SGLang router's cache-aware policy",
            baseline=True,
        ),
    )
})  # read-only: the table is the same for every gateway and simulation


class UnknownProfileError(ValueError):
    """A profile name that is not in :data:`PROFILES`."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"unknown routing profile {name!r}; known: {', '.join(profile_names())}"
        )


def profile_names() -> list[str]:
    """Every profile name, the default first."""
    return [DEFAULT_PROFILE, *sorted(n for n in PROFILES if n != DEFAULT_PROFILE)]


def profile_config(name: str) -> dict[str, Any]:
    """A copy of the named profile's config dict (raises :class:`UnknownProfileError`)."""
    found = PROFILES.get(name)
    if found is None:
        raise UnknownProfileError(name)
    return copy.deepcopy(dict(found.config))


def build_profile(
    spec: str | Mapping[str, Any],
    ctx: RoutingContext,
    registry: PluginRegistry | None = None,
) -> RoutingProfile:
    """A profile from a name in :data:`PROFILES` or from a profile dict
    (``{name, filters, scorers: [{name, weight, ...}], picker}``)."""
    config = profile_config(spec) if isinstance(spec, str) else spec
    return (registry or default_registry()).build_profile(config, ctx)


def check_profile(spec: str | Mapping[str, Any]) -> None:
    """Raise ValueError when ``spec`` names no profile or holds an unknown plugin."""
    build_profile(spec, RoutingContext(prefix_capacity_blocks=1))
