"""The capacity plan as a PNG: replicas per hour of the day, one line per scenario,
with the base scenario's demand in tokens per second behind them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_plan_plot(plans: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 5))
    ax = fig.subplots()
    first = True
    for name, plan in plans.items():
        hours = plan["hours"]
        xs = [h["hour"] for h in hours]
        if first:
            demand = ax.twinx()
            demand.bar(xs, [h["tokens_per_s"] for h in hours], color="lightgrey", alpha=0.5,
                       width=0.8, label=f"{name}: tokens/s")
            demand.set_ylabel("demand (tokens/s)")
            ax.set_zorder(demand.get_zorder() + 1)
            ax.patch.set_visible(False)
            first = False
        ax.step(xs, [h["recommended"] for h in hours], where="mid", marker="o",
                label=f"{name}: recommended (peak {plan['peak']['recommended']})")
        ax.step(xs, [h["needed"] for h in hours], where="mid", linestyle=":", alpha=0.7,
                label=f"{name}: needed")
    ax.set_xlabel("hour of the day")
    ax.set_ylabel("replicas")
    ax.set_xticks(range(24))
    ax.set_xlim(-0.5, 23.5)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
