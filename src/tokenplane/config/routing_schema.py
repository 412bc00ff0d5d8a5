"""Config sections for routing (profiles, splits, breakers, scraping) and gateway
scheduling (SLO classes, the saturation gate). See docs/ROUTING.md."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BreakerConfig(_Strict):
    """Per-replica circuit breaker (outlier ejection); see routing/breaker.py."""

    consecutive_failures: int = Field(5, ge=1)
    error_rate: float = Field(0.5, gt=0, le=1)
    min_requests: int = Field(20, ge=1)
    window_s: float = Field(10.0, gt=0)
    open_s: float = Field(5.0, gt=0)
    max_open_s: float = Field(60.0, gt=0)
    probe_successes: int = Field(1, ge=1)


class SplitGuardConfig(_Strict):
    """Roll the split back to ``stable`` when ``canary`` does clearly worse on the SLO
    ``slo`` (docs/SLO.md, "Canary guard"). Durations in seconds."""

    slo: str = Field(min_length=1)
    stable: str = Field(min_length=1)
    canary: str = Field(min_length=1)
    window: float = Field(3600.0, gt=0)
    min_requests: int = Field(100, ge=1)
    confidence: float = Field(0.999, gt=0.5, lt=1)
    burn_limit: float = Field(14.4, gt=1)


class SplitConfig(_Strict):
    """A canary / A-B split of one alias between model versions."""

    weights: dict[str, float] = Field(min_length=1)
    by: Literal["request", "session"] = "request"
    header: str | None = None
    header_versions: dict[str, str] = Field(default_factory=dict)
    tenant_versions: dict[str, str] = Field(default_factory=dict)
    salt: str = ""
    guard: SplitGuardConfig | None = None

    @field_validator("weights")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        if any(w < 0 for w in v.values()) or sum(v.values()) <= 0:
            raise ValueError("split weights must be non-negative with a positive sum")
        return v

    @model_validator(mode="after")
    def _guard_versions(self) -> SplitConfig:
        g = self.guard
        if g is not None:
            for field, version in (("stable", g.stable), ("canary", g.canary)):
                if version not in self.weights:
                    raise ValueError(f"guard.{field}: {version!r} is not a version of the "
                                     f"split's weights")
            if g.stable == g.canary:
                raise ValueError("guard: stable and canary must differ")
        return self


Profile = str | dict[str, Any]


class RoutingConfig(_Strict):
    """``profile``: a profile name of ``routing/profiles.py`` (the default is its
    ``DEFAULT_PROFILE``) or a profile dict (filters, scorers, picker); ``models``:
    per-alias override; ``splits``: per-alias version split."""

    # a name in tokenplane.routing.profiles (the default: its DEFAULT_PROFILE) or a dict;
    # names and plugins are checked when the config is loaded (compose/config_file.py)
    profile: Profile = "tokenplane"
    models: dict[str, Profile] = Field(default_factory=dict)
    splits: dict[str, SplitConfig] = Field(default_factory=dict)
    block_size: int = Field(16, ge=1, le=4096)
    prefix_capacity_blocks: int = Field(100_000, ge=1)
    max_attempts: int = Field(3, ge=1, le=10)
    scrape_interval_s: float = Field(1.0, ge=0)  # 0: no scraping
    scrape_timeout_s: float = Field(0.5, gt=0)
    session_header: str = "x-session-id"
    breaker: BreakerConfig = Field(default_factory=lambda: BreakerConfig())  # type: ignore[call-arg]


class SloClassSpec(_Strict):
    """One SLO class in config (``scheduling.classes.<name>``); see scheduling/slo.py."""

    priority: int = 0  # the band: lower is served first
    ttft_s: float | None = Field(None, gt=0)
    tpot_s: float | None = Field(None, gt=0)
    deadline_s: float | None = Field(None, gt=0)
    sheddable: bool = False
    gate_fraction: float = Field(1.0, gt=0, le=1)


# The classes a config without ``scheduling.classes`` gets: interactive (TTFT <= 1 s,
# TPOT <= 50 ms) and batch (a 10-minute deadline, sheddable, half a replica at most).
DEFAULT_SLO_CLASSES: dict[str, dict[str, Any]] = {
    "interactive": {"priority": 0, "ttft_s": 1.0, "tpot_s": 0.05},
    "batch": {"priority": 1, "deadline_s": 600.0, "sheddable": True, "gate_fraction": 0.5},
}


class SchedulingConfig(_Strict):
    """The gateway queue: SLO classes, how requests pick one, and the gate's limits."""

    enabled: bool = True
    classes: dict[str, SloClassSpec] = Field(default_factory=dict)  # {} = the defaults
    default_class: str = "interactive"
    header: str = "x-tokenplane-slo-class"
    by_app: dict[str, str] = Field(default_factory=dict)
    by_key: dict[str, str] = Field(default_factory=dict)  # key id -> class
    by_tenant: dict[str, str] = Field(default_factory=dict)
    max_waiting: int = Field(8, ge=1)  # queued requests per replica before it is saturated
    max_num_seqs: int | None = Field(None, ge=1)  # None: the engine profile's, else 256
    kv_limit: float = Field(0.92, gt=0, le=1)
    tick_s: float = Field(0.1, gt=0)
    tenant_weights: dict[str, float] = Field(default_factory=dict)
    # a request already past its class's TTFT target yields once, by this many seconds
    # of aging, to requests that can still meet theirs; 0 turns it off
    late_defer_s: float = Field(30.0, ge=0)

    def class_specs(self) -> dict[str, dict[str, Any]]:
        """``{name: spec}`` of the configured classes, or of the defaults."""
        if not self.classes:
            return {n: dict(spec) for n, spec in DEFAULT_SLO_CLASSES.items()}
        return {n: c.model_dump(exclude_none=True) for n, c in self.classes.items()}

    @model_validator(mode="after")
    def _known_classes(self) -> SchedulingConfig:
        names = set(self.classes or DEFAULT_SLO_CLASSES)
        used = {self.default_class, *self.by_app.values(), *self.by_key.values(),
                *self.by_tenant.values()}
        unknown = sorted(used - names)
        if unknown:
            raise ValueError(f"unknown SLO classes {unknown}; known: {sorted(names)}")
        return self
