"""Goodput to a stated precision: bisection on the load factor around the knee.

A coarse sweep (``run_simulation``) gives goodput only to the sweep step.
``refine_goodput`` takes the swept points of one policy, brackets the knee between
the highest passing load (attainment >= threshold) and the next swept load above
it (which fails), and bisects that bracket until ``(hi - lo) / lo <= rel_tol``.
Each probe is one more simulated point (``evaluate(load)``). Attainment against
load is not strictly monotone in a simulation (a heavier load can shuffle which
requests collide), so bisection finds *a* crossing inside the bracket; the result
states the bracket so that the precision is explicit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenplane.sim.metrics import passes


@dataclass
class GoodputEstimate:
    """Goodput (requests/s at the highest passing load) and its bracket."""

    goodput_rps: float
    load_pass: float  # highest load found to pass (0.0 if none)
    load_fail: float | None  # lowest load above it found to fail (None: not bracketed)
    probes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def rel_precision(self) -> float | None:
        """(fail - pass) / pass: how far above the reported goodput the knee may lie."""
        if self.load_fail is None or self.load_pass <= 0:
            return None
        return (self.load_fail - self.load_pass) / self.load_pass


def _passes(pt: Mapping[str, Any], threshold: float) -> bool:
    return passes(pt, threshold)


def refine_goodput(
    points: Sequence[Mapping[str, Any]],
    evaluate: Callable[[float], Mapping[str, Any]],
    *,
    threshold: float = 0.9,
    rel_tol: float = 0.01,
    max_probes: int = 10,
) -> GoodputEstimate:
    """Bisect the load bracket around the goodput knee of one policy's sweep.

    ``points`` carry ``load``, ``rate_rps`` and ``slo_attainment``; ``evaluate``
    simulates one more load factor and returns a point of the same shape.
    """
    if not 0 < rel_tol < 1:
        raise ValueError("rel_tol must be in (0, 1)")
    pts = sorted(points, key=lambda p: float(p["load"]))
    passing = [p for p in pts if _passes(p, threshold)]
    if not passing:
        return GoodputEstimate(0.0, 0.0, float(pts[0]["load"]) if pts else None)
    best = max(passing, key=lambda p: float(p["load"]))
    lo = float(best["load"])
    lo_rate = float(best["rate_rps"])
    above = [p for p in pts if float(p["load"]) > lo]
    if not above:
        return GoodputEstimate(lo_rate, lo, None)
    hi = float(above[0]["load"])
    probes: list[dict[str, Any]] = []
    while (hi - lo) / lo > rel_tol and len(probes) < max_probes:
        mid = round((lo + hi) / 2.0, 6)
        pt = dict(evaluate(mid))
        pt.setdefault("load", mid)
        probes.append(pt)
        if _passes(pt, threshold):
            lo, lo_rate = mid, float(pt["rate_rps"])
        else:
            hi = mid
    return GoodputEstimate(lo_rate, lo, hi, probes)


def find_knee(
    points: Sequence[Mapping[str, Any]],
    evaluate: Callable[[float], Mapping[str, Any]],
    *,
    threshold: float = 0.9,
    rel_tol: float = 0.02,
    max_probes: int = 12,
) -> GoodputEstimate:
    """Goodput wherever the knee lies, not only inside the loads swept: when no swept
    load passes, halve the lowest until one does; when every one passes, double the
    highest until one fails; then bisect the bracket (``refine_goodput``). The probes
    count against ``max_probes``; an estimate still unbracketed says so
    (``load_fail`` None, or ``load_pass`` 0)."""
    pts = [dict(p) for p in sorted(points, key=lambda p: float(p["load"]))]
    if not pts:
        raise ValueError("find_knee needs at least one swept point")
    probes: list[dict[str, Any]] = []

    def probe(load: float) -> dict[str, Any]:
        pt = dict(evaluate(load))
        pt.setdefault("load", load)
        probes.append(pt)
        pts.append(pt)
        return pt

    while not any(_passes(p, threshold) for p in pts) and len(probes) < max_probes:
        probe(round(min(float(p["load"]) for p in pts) / 2.0, 6))
    while (all(_passes(p, threshold) for p in pts) and pts
           and len(probes) < max_probes):
        probe(round(max(float(p["load"]) for p in pts) * 2.0, 6))
    est = refine_goodput(pts, evaluate, threshold=threshold, rel_tol=rel_tol,
                         max_probes=max(0, max_probes - len(probes)))
    est.probes = probes + est.probes
    return est
