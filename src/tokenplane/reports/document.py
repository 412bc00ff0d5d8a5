"""A report as a list of blocks (headings, paragraphs, tables, charts) that the HTML
and PDF writers both render, so the two formats always carry the same numbers."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True, slots=True)
class Para:
    text: str


@dataclass(frozen=True, slots=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...] = ()  # right-aligned columns

    def is_numeric(self, i: int) -> bool:
        return i < len(self.numeric) and self.numeric[i]


@dataclass(frozen=True, slots=True)
class Chart:
    png: bytes
    caption: str


Block = Heading | Para | Table | Chart


@dataclass
class Document:
    title: str
    subtitle: str
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks.extend(blocks)


def bar_chart(labels: Sequence[str], values: Sequence[float], title: str, ylabel: str,
              line: Sequence[float] | None = None, line_label: str = "") -> bytes:
    """A PNG bar chart (matplotlib, no display), with an optional line over it."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2))
    ax = fig.subplots()
    xs = list(range(len(labels)))
    ax.bar(xs, list(values), color="#4C78A8")
    if line is not None:
        ax.plot(xs, list(line), color="#F58518", marker="o", label=line_label)
        ax.legend(fontsize=8)
    step = max(1, len(labels) // 12)
    ax.set_xticks(xs[::step], [labels[i] for i in xs[::step]], fontsize=7,
                  rotation=30 if len(labels) > 6 else 0)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()
