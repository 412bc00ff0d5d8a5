"""Counters and histograms for the request path, exported as Prometheus families.

prometheus_client's children check their type and take a lock on every ``inc`` and
``observe`` (about a microsecond each); the meter updates a dozen series per request.
These cells are plain numbers that only the event-loop thread writes, so they need
neither. A :class:`CounterCells` / :class:`HistogramCells` is registered on a
registry like any collector; a scrape (on the same thread) reads the numbers. The
exposition is what prometheus_client writes for its own counters and histograms
(``_total``; ``_bucket`` / ``_count`` / ``_sum``), without the ``_created`` samples.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

C = TypeVar("C")


class CounterCell:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount


class HistogramCell:
    """Per-bucket counts (not cumulative; the exposition adds them up) and the sum."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self._bounds, value)] += 1
        self.sum += value


class _Family(Generic[C]):
    """Cells by label values, created on first use; registered on ``registry``."""

    def __init__(self, name: str, doc: str, labelnames: Sequence[str],
                 new_cell: Callable[[], C], registry: CollectorRegistry) -> None:
        self.name = name
        self.doc = doc
        self.labelnames = list(labelnames)
        self._new_cell = new_cell
        self._cells: dict[tuple[str, ...], C] = {}
        registry.register(self)

    def labels(self, *values: str) -> C:
        cell = self._cells.get(values)
        if cell is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, "
                                 f"got {values}")
            cell = self._cells[values] = self._new_cell()
        return cell

    def describe(self) -> Iterator[Metric]:
        return iter(())

    def collect(self) -> Iterator[Metric]:
        raise NotImplementedError


class CounterCells(_Family[CounterCell]):
    def __init__(self, name: str, doc: str, labelnames: Sequence[str],
                 registry: CollectorRegistry) -> None:
        super().__init__(name, doc, labelnames, CounterCell, registry)

    def collect(self) -> Iterator[Metric]:
        fam = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
        for values, cell in list(self._cells.items()):
            fam.add_metric(list(values), cell.value)
        yield fam


class HistogramCells(_Family[HistogramCell]):
    def __init__(self, name: str, doc: str, labelnames: Sequence[str],
                 buckets: Sequence[float], registry: CollectorRegistry) -> None:
        bounds = tuple(float(b) for b in buckets)
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"{name}: buckets must be strictly increasing")
        self.bounds = bounds
        super().__init__(name, doc, labelnames, lambda: HistogramCell(bounds), registry)

    def collect(self) -> Iterator[Metric]:
        fam = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        edges = [repr(b) for b in self.bounds] + ["+Inf"]  # as prometheus_client writes le
        for values, cell in list(self._cells.items()):
            running = 0
            buckets: list[tuple[str, float]] = []
            for edge, n in zip(edges, list(cell.counts), strict=True):
                running += n
                buckets.append((edge, running))
            fam.add_metric(list(values), buckets, cell.sum)
        yield fam

