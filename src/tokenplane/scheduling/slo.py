"""SLO classes: latency targets, priority band, and whether a class may be shed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenplane.config.routing_schema import DEFAULT_SLO_CLASSES


@dataclass(frozen=True, slots=True)
class SloClass:
    """One service class.

    ``priority`` is the band: lower numbers are served first. ``gate_fraction``
    is the share of a replica's capacity this class may fill before it waits at
    the gateway (batch below 1.0 leaves headroom for interactive arrivals).
    A request meets its SLO when every target that is set is met.
    """

    name: str
    priority: int = 0
    ttft_s: float | None = None
    tpot_s: float | None = None
    deadline_s: float | None = None
    sheddable: bool = False
    gate_fraction: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 < self.gate_fraction <= 1.0:
            raise ValueError("gate_fraction must be in (0, 1]")
        for v in (self.ttft_s, self.tpot_s, self.deadline_s):
            if v is not None and v <= 0:
                raise ValueError("SLO targets must be positive")

    def met(self, *, ttft_s: float, tpot_s: float, e2e_s: float) -> bool:
        """Whether a finished request with these latencies met this class's SLO."""
        if self.ttft_s is not None and ttft_s > self.ttft_s:
            return False
        if self.tpot_s is not None and tpot_s > self.tpot_s:
            return False
        return self.deadline_s is None or e2e_s <= self.deadline_s


def default_slo_classes() -> dict[str, SloClass]:
    """``interactive`` (TTFT <= 1 s, TPOT <= 50 ms) and ``batch`` (10-minute deadline):
    the config's defaults (``config.routing_schema.DEFAULT_SLO_CLASSES``)."""
    return slo_classes_from_config(DEFAULT_SLO_CLASSES)


def slo_classes_from_config(cfg: Mapping[str, Mapping[str, Any]]) -> dict[str, SloClass]:
    """Build classes from ``{name: {priority, ttft_s, tpot_s, deadline_s, sheddable, ...}}``."""
    known = {"priority", "ttft_s", "tpot_s", "deadline_s", "sheddable", "gate_fraction"}
    out: dict[str, SloClass] = {}
    for name, spec in cfg.items():
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"SLO class {name!r}: unknown keys {sorted(unknown)}")

        def opt(key: str, spec: Mapping[str, Any] = spec) -> float | None:
            v = spec.get(key)
            return None if v is None else float(v)

        out[name] = SloClass(
            name=name,
            priority=int(spec.get("priority", 0)),
            ttft_s=opt("ttft_s"),
            tpot_s=opt("tpot_s"),
            deadline_s=opt("deadline_s"),
            sheddable=bool(spec.get("sheddable", False)),
            gate_fraction=float(spec.get("gate_fraction", 1.0)),
        )
    return out
