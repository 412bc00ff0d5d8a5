"""PNG plots of a simulation sweep (matplotlib, Agg backend, no display)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# (class or None for all requests, key, title)
PANELS = (
    (None, "slo_attainment", "SLO attainment (all requests)"),
    ("interactive", "ttft_p99_s", "interactive TTFT p99 (s)"),
    ("interactive", "tpot_p99_s", "interactive TPOT p99 (s)"),
    (None, "e2e_p99_s", "end-to-end p99, all requests (s)"),
)


def _value(point: Mapping[str, Any], cls: str | None, key: str) -> float:
    src = point if cls is None else point.get("per_class", {}).get(cls)
    if src is None:
        src = point
    v = src.get(key)
    return math.nan if v is None else float(v)


def write_plots(results: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Write ``latency_vs_load.png`` and ``attainment_vs_load.png``; return their paths."""
    from matplotlib.figure import Figure

    written: list[Path] = []
    policies: Mapping[str, Any] = results["policies"]

    fig = Figure(figsize=(12, 8))
    axes = fig.subplots(2, 2)
    for ax, (cls, key, title) in zip(axes.flat, PANELS, strict=True):
        for name, pol in policies.items():
            pts = pol["points"]
            ys = [_value(p, cls, key) for p in pts]
            ax.plot([p["rate_rps"] for p in pts], ys, "o-", label=name)
        ax.set_title(title)
        ax.set_xlabel("request rate (req/s)")
        if key != "slo_attainment":
            ax.set_yscale("log")
        ax.grid(True, alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    path = out_dir / "latency_vs_load.png"
    fig.savefig(path, dpi=100)
    written.append(path)

    classes = sorted(
        {c for pol in policies.values() for p in pol["points"] for c in p["per_class"]}
    )
    fig2 = Figure(figsize=(6 * max(1, len(classes)), 4.5))
    axes2 = fig2.subplots(1, max(1, len(classes)), squeeze=False)
    for ax, cls in zip(axes2[0], classes, strict=False):
        for name, pol in policies.items():
            pts = pol["points"]
            ys = [p["per_class"].get(cls, {}).get("slo_attainment", math.nan) for p in pts]
            ax.plot([p["rate_rps"] for p in pts], ys, "o-", label=name)
        ax.axhline(0.9, color="grey", linestyle=":", linewidth=1)
        ax.set_title(f"SLO attainment: {cls}")
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig2.tight_layout()
    path2 = out_dir / "attainment_vs_load.png"
    fig2.savefig(path2, dpi=100)
    written.append(path2)
    return written
