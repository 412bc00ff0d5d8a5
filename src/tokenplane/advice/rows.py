"""Sums of aggregate rows over chosen dimensions."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from tokenplane.advice.model import Aggregate, summed

K = TypeVar("K", bound=Hashable)


def group(rows: Iterable[Aggregate], key: Callable[[Aggregate], K]) -> dict[K, Aggregate]:
    """One summed row per key (dimensions of the first row of each group). The rows
    given are never changed: a group of one is that row itself, a sum a new row."""
    members: dict[K, list[Aggregate]] = {}
    for row in rows:
        members.setdefault(key(row), []).append(row)
    return {k: rows_[0] if len(rows_) == 1 else summed(rows_) for k, rows_ in members.items()}


def per_answer(row: Aggregate) -> float:
    return row.answer_output_tokens / row.answers if row.answers else 0.0


def per_request_input(row: Aggregate) -> float:
    return row.input_tokens / row.requests if row.requests else 0.0


def spread(row: Aggregate) -> float:
    """Standard deviation of answer lengths."""
    if row.answers < 2:
        return 0.0
    mean = per_answer(row)
    var = max(0.0, row.answer_output_sq / row.answers - mean * mean)
    return float(var ** 0.5)


def app_key(row: Aggregate) -> tuple[str, str]:
    return (row.tenant, row.app)


def alias_key(row: Aggregate) -> tuple[str, str, str]:
    return (row.tenant, row.app, row.model)


def evidence_query(table: str, row: Aggregate, group_by: str, *,
                   with_model: bool = True, with_app: bool = True) -> str:
    """The aggregate behind a finding, written as the query it is."""
    where = [f"tenant = '{row.tenant}'"]
    if with_app:
        where.append(f"app = '{row.app}'")
    if with_model:
        where.append(f"model = '{row.model}'")
    where.append("bucket in the window")
    return f"SELECT sums FROM {table} WHERE {' AND '.join(where)} GROUP BY {group_by}"
