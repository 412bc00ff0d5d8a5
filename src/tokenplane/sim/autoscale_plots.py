"""PNG plots of a simulated autoscaling day (matplotlib, Agg, no display): demand and
replicas against time, attainment against time, one line per policy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _hours(n: int, time_scale: float) -> list[float]:
    return [(m + 0.5) * 60.0 * time_scale / 3600.0 for m in range(n)]


def _bins(values: list[int], width: int) -> list[int]:
    return [sum(values[i:i + width]) for i in range(0, len(values), width)]


def write_day_plots(results: Mapping[str, Any], time_scale: float, out_dir: Path) -> list[Path]:
    """``autoscale_replicas.png`` (demand, serving and warm replicas) and
    ``autoscale_attainment.png`` (interactive attainment per 10-minute bin)."""
    from matplotlib.figure import Figure

    pols: Mapping[str, Any] = results["policies"]
    written: list[Path] = []
    fig = Figure(figsize=(13, 8))
    ax_d, ax_r = fig.subplots(2, 1, sharex=True)
    first = next(iter(pols.values()))
    arrivals = first["series"]["arrivals"]
    xs = _hours(len(arrivals), time_scale)
    k = float(results["config"]["rate_scale"])
    ax_d.plot(xs, [a / 60.0 * k for a in arrivals], color="black", linewidth=0.8)
    ax_d.set_ylabel("demand (req/s, undilated)")
    ax_d.set_title("demand over the day")
    ax_d.grid(True, alpha=0.3)
    for name, pol in pols.items():
        s = pol["series"]
        line = ax_r.plot(xs, s["serving"], label=f"{name} serving", linewidth=1.2)
        if any(s["warm"]):
            ax_r.plot(xs, [a + b for a, b in zip(s["serving"], s["warm"], strict=True)],
                      linestyle=":", color=line[0].get_color(), label=f"{name} +warm")
    ax_r.set_ylabel("replicas")
    ax_r.set_xlabel("hour of day")
    ax_r.grid(True, alpha=0.3)
    ax_r.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    p1 = out_dir / "autoscale_replicas.png"
    fig.savefig(p1, dpi=90)
    written.append(p1)

    fig2 = Figure(figsize=(13, 5))
    ax = fig2.subplots(1, 1)
    width = 10
    for name, pol in pols.items():
        s = pol["series"]
        n = _bins(s["interactive_n"], width)
        ok = _bins(s["interactive_ok"], width)
        ys = [o / c if c else float("nan") for o, c in zip(ok, n, strict=True)]
        bx = [(i * width + width / 2) * 60.0 * time_scale / 3600.0 for i in range(len(ys))]
        ax.plot(bx, ys, label=name, linewidth=1.0)
    target = float(results["config"]["slo_target"])
    ax.axhline(target, color="grey", linestyle=":", linewidth=1)
    ax.set_ylim(0.5, 1.005)
    ax.set_xlabel("hour of day")
    ax.set_ylabel("interactive SLO attainment (10-min bins)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig2.tight_layout()
    p2 = out_dir / "autoscale_attainment.png"
    fig2.savefig(p2, dpi=90)
    written.append(p2)
    return written
