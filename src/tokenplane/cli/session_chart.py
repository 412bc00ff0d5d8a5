"""The PNG of a session's waterfall: per step, its prompt tokens stacked by source
(tool results apart from the rest of the context) and its output tokens, with the
tool-output tokens each step added marked above its bar (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# (label, colour) of each stacked layer, bottom first
LAYERS = (
    ("system", "#4c72b0"),
    ("tools", "#8172b2"),
    ("history", "#937860"),
    ("context", "#64b5cd"),
    ("tool output", "#dd8452"),
    ("user", "#55a868"),
    ("output", "#c44e52"),
)


def layer_values(step: dict[str, Any]) -> dict[str, int]:
    """A step's tokens per layer; tool results are part of the ``context`` source,
    shown apart (their content tokens; the template's framing stays in context)."""
    context = int(step["context"])
    tool = min(int(step["tool_output_tokens"]), context)
    return {
        "system": int(step["system"]),
        "tools": int(step["tools"]),
        "history": int(step["history"]),
        "context": context - tool,
        "tool output": tool,
        "user": int(step["user"]),
        "output": int(step["output_tokens"]),
    }


def write_waterfall(report: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    steps = report["steps"]
    fig = Figure(figsize=(max(6.0, 0.6 * len(steps) + 3), 5))
    ax = fig.subplots()
    xs = list(range(len(steps)))
    bottoms = [0] * len(steps)
    values = [layer_values(s) for s in steps]
    for label, colour in LAYERS:
        heights = [v[label] for v in values]
        ax.bar(xs, heights, bottom=bottoms, color=colour, label=label, width=0.7)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    for x, s, top in zip(xs, steps, bottoms, strict=True):
        added = int(s["tool_output_added"])
        if added:
            ax.annotate(f"+{added}", (x, top), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, [str(s["step"]) for s in steps])
    ax.set_xlabel("step")
    ax.set_ylabel("tokens")
    total = report["total"]
    ax.set_title(f"session {report['id']} ({report['tenant']}): {total['steps']} steps, "
                 f"{total['total_tokens']} tokens, {total['cost']} {report['currency']}")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
