"""The CLI's tables as a person reads them: instants as ISO times (never epoch floats),
spans as durations (``30 days``, not ``2592000.0``), and no wider than 100 columns
unless ``--wide``: the columns that matter first, the rest named under the table.
JSON and CSV keep the raw values (they are for programs)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer

from tokenplane.metering.reports import format_rows
from tokenplane.timefmt import duration, utc_iso

WIDTH = 100
ALL = 10**9  # --wide: no limit
GAP = 2  # format_rows puts two spaces between columns
# column names that hold an instant (epoch seconds) or a span (seconds)
INSTANTS = frozenset({"ts", "at", "created_at", "updated_at", "revoked_at", "resets_at",
                      "written_at", "first_ts", "last_ts", "arrival_ts", "started_at"})
# what a table never needs twice: the exact micro-units beside the amount
REDUNDANT = {"cost_micros": "cost", "saved_cost_micros": "saved_cost"}

Wide = Annotated[bool, typer.Option(
    "--wide", help=f"Every column (tables fit {WIDTH} columns by default).")]


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def readable(row: Mapping[str, Any]) -> dict[str, Any]:
    """One row with its instants as ISO times and its spans as durations."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if _is_num(v) and (k in INSTANTS or k.endswith("_ts")):
            out[k] = utc_iso(float(v))
        elif _is_num(v) and (k.endswith("_s") or k == "window") and "_per_" not in k:
            out[k] = duration(float(v))
        elif isinstance(v, float):
            out[k] = float(f"{v:.4g}") if abs(v) < 1e4 else round(v, 1)
        else:
            out[k] = v
    return out


def _width(rows: Sequence[Mapping[str, Any]], col: str) -> int:
    return max(len(col), *(len("" if r.get(col) is None else str(r.get(col))) for r in rows))


def fit(rows: Sequence[Mapping[str, Any]], first: Sequence[str] = (),
        width: int = WIDTH) -> tuple[list[str], list[str]]:
    """The columns shown and those left out: ``first`` in its order, then the others
    left to right, while the table stays within ``width``."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if width < ALL:  # --wide: everything, the exact micro-units included
        columns = [c for c in columns if not (c in REDUNDANT and REDUNDANT[c] in columns)]
    order = [c for c in first if c in columns] + [c for c in columns if c not in first]
    kept: set[str] = set()
    used = -GAP
    for c in order:
        w = _width(rows, c) + GAP
        if used + w > width and kept:
            continue
        kept.add(c)
        used += w
    return [c for c in order if c in kept], [c for c in order if c not in kept]


def table(rows: Sequence[Mapping[str, Any]], fmt: str = "table", *, wide: bool = False,
          first: Sequence[str] = (), width: int = WIDTH) -> str:
    """``rows`` as ``fmt``; a table readable and, unless ``wide``, within ``width``."""
    if fmt != "table":
        return format_rows([dict(r) for r in rows], fmt)
    shown = [readable(r) for r in rows]
    if not shown:
        return format_rows(shown, "table")
    keep, left = fit(shown, first, ALL if wide else width)
    text = format_rows([{c: r.get(c) for c in keep} for r in shown], "table")
    if left:
        note = f"(--wide for {len(left)} more columns: {', '.join(left)})"
        text += "\n".join(textwrap.wrap(note, width)) + "\n"
    return text
