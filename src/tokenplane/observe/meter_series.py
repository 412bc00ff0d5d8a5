"""The metric cells one kind of finished request updates, looked up once.

:class:`SeriesBook` keeps, per (alias, operation, status, http status, outcome,
principal labels), the cells (observe/cells.py) that request updates, each created the first
time it is needed (so a series appears in the exposition exactly when it would with
plain ``labels()`` calls).
"""

from __future__ import annotations

from tokenplane.observe.cells import CounterCell, HistogramCell
from tokenplane.observe.metrics import GatewayMetrics

# (alias, operation, status, http status, outcome, principal labels)
SeriesKey = tuple[str, str, str, int, str, tuple[str, ...]]


class RequestSeries:
    """The children of one (alias, operation, status, code, outcome, principal labels)."""

    __slots__ = ("_alias", "_cost", "_labels", "_m", "_tokens", "_tpot", "_ttft", "e2e",
                 "requests")

    def __init__(self, m: GatewayMetrics, key: SeriesKey) -> None:
        alias, operation, status, code, outcome, labels = key
        self._m, self._alias, self._labels = m, alias, labels
        self.requests: CounterCell = m.requests.labels(alias, operation, status, str(code),
                                                       outcome, *labels)
        self.e2e: HistogramCell = m.e2e.labels(alias, operation)
        self._ttft: HistogramCell | None = None
        self._tpot: HistogramCell | None = None
        self._tokens: dict[str, CounterCell] = {}
        self._cost: dict[str, CounterCell] = {}

    def ttft(self) -> HistogramCell:
        if self._ttft is None:
            self._ttft = self._m.ttft.labels(self._alias)
        return self._ttft

    def tpot(self) -> HistogramCell:
        if self._tpot is None:
            self._tpot = self._m.tpot.labels(self._alias)
        return self._tpot

    def tokens(self, kind: str) -> CounterCell:
        child = self._tokens.get(kind)
        if child is None:
            child = self._tokens[kind] = self._m.tokens.labels(self._alias, kind, *self._labels)
        return child

    def cost(self, currency: str) -> CounterCell:
        child = self._cost.get(currency)
        if child is None:
            child = self._cost[currency] = self._m.cost.labels(self._alias, currency,
                                                               *self._labels)
        return child


class SeriesBook:
    """:class:`RequestSeries` by key (as many as the metrics have series anyway)."""

    def __init__(self, metrics: GatewayMetrics) -> None:
        self.metrics = metrics
        self._by_key: dict[SeriesKey, RequestSeries] = {}

    def get(self, key: SeriesKey) -> RequestSeries:
        found = self._by_key.get(key)
        if found is None:
            found = self._by_key[key] = RequestSeries(self.metrics, key)
        return found
