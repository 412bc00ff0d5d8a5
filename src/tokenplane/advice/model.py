"""The advisor's inputs (aggregate rows, prices, thresholds) and its output (findings)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from decimal import ROUND_HALF_UP, Decimal
from operator import attrgetter
from typing import Any

MONTH_S = 30 * 86400


@dataclass(slots=True)
class Aggregate:
    """Sums over the events of one (day, tenant, app, alias, version, template,
    currency): a row of ``advice_rollups``, or a sum of such rows."""

    tenant: str = ""
    app: str = ""
    model: str = ""
    version: str = ""  # "" when the replica reported none
    template: str = ""  # the system prompt's fingerprint; "" without a system prompt
    bucket: int = 0  # start of the day (epoch seconds)
    currency: str = "USD"
    requests: int = 0
    errors: int = 0
    answers: int = 0  # successful attempts that reached an upstream
    answer_output_tokens: int = 0  # output tokens of those answers
    answer_output_sq: int = 0  # sum of their squares (the spread of answer lengths)
    length_finishes: int = 0  # answers the upstream ended with finish_reason "length"
    length_output_tokens: int = 0  # output tokens of those
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    input_system: int = 0
    input_history: int = 0
    input_context: int = 0
    input_tools: int = 0
    cost_micros: int = 0
    context_offered_tokens: int = 0
    context_kept_tokens: int = 0
    history_dropped_tokens: int = 0
    tool_output_tokens: int = 0  # agent sessions' tool results (needs ledger v6)
    tool_output_removed: int = 0
    # per day and template, the system tokens of every request but the first (which
    # writes a cache) and of the first: summed over days, what a prefix cache could
    # serve and the writes it would pay (see caching.py); 0 without a template
    prefix_repeat_tokens: int = 0
    prefix_write_tokens: int = 0
    # requests and history tokens of the earlier and later half of the data's days
    early_requests: int = 0
    early_history: int = 0
    late_requests: int = 0
    late_history: int = 0



DIMENSIONS: tuple[str, ...] = (
    "tenant", "app", "model", "version", "template", "bucket", "currency")
MEASURES: tuple[str, ...] = tuple(
    f.name for f in fields(Aggregate) if f.name not in DIMENSIONS)
_MEASURES_OF = attrgetter(*MEASURES)
_DIMENSIONS_OF = attrgetter(*DIMENSIONS)


def summed(rows: list[Aggregate]) -> Aggregate:
    """A new row: the first row's dimensions, the measures summed (column by column)."""
    dims = dict(zip(DIMENSIONS, _DIMENSIONS_OF(rows[0]), strict=True))
    sums = [sum(col) for col in zip(*map(_MEASURES_OF, rows), strict=True)]
    return Aggregate(**dims, **dict(zip(MEASURES, sums, strict=True)))


@dataclass(frozen=True, slots=True)
class FeedbackAggregate:
    """Scores recorded with ``POST /v1/feedback`` for one (tenant, app, alias)."""

    tenant: str
    app: str
    model: str
    count: int
    score_sum: float  # scores are in [0, 1]

    @property
    def mean(self) -> float:
        return self.score_sum / self.count if self.count else 0.0


@dataclass(frozen=True, slots=True)
class Rates:
    """An alias's prices per 1M tokens (a price times a token count is micro-units)."""

    input: Decimal = Decimal(0)
    cached_input: Decimal = Decimal(0)
    cache_write: Decimal = Decimal(0)
    output: Decimal = Decimal(0)


def micros(tokens: float, rate: Decimal) -> int:
    """Cost in micro-units of ``tokens`` at ``rate`` per 1M tokens, rounded half up."""
    return int((Decimal(repr(float(tokens))) * rate).quantize(Decimal(1), ROUND_HALF_UP))


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a pattern becomes a finding (docs/ADVICE.md says why these defaults)."""

    min_requests: int = 20  # per group compared (template, version, alias, app)
    template_ratio: float = 1.5  # avg input tokens of one template over the leanest's
    cacheable_share: float = 0.2  # repeated prefix tokens / prompt tokens
    min_tokens_per_month: int = 10_000  # savings below this are not worth a finding
    length_share: float = 0.1  # answers ended by max_tokens
    peer_ratio: float = 2.0  # output per answer over the other apps' (same alias)
    version_ratio: float = 1.3  # output per answer of one version over another's
    max_error_gap: float = 0.01  # a cheaper alias may fail this much more often
    min_feedback: int = 20  # scores per alias before right-sizing compares them
    max_score_gap: float = 0.05  # a cheaper alias may score this much lower
    context_kept_share: float = 0.6  # RAG context kept / offered below this
    history_share: float = 0.4  # history tokens / prompt tokens
    tool_output_share: float = 0.3  # tool results / prompt tokens


@dataclass(frozen=True, slots=True)
class Window:
    """The period the aggregates cover; savings are scaled to 30 days."""

    since: float
    until: float

    @property
    def days(self) -> float:
        return max(1.0, (self.until - self.since) / 86400)

    def per_month(self, value: float) -> float:
        return value * MONTH_S / max(86400.0, self.until - self.since)


@dataclass(slots=True)
class Finding:
    """One thing to change: what was seen (evidence), what it would save, what to do."""

    kind: str
    tenant: str
    app: str
    model: str
    title: str
    evidence: dict[str, Any]  # {"query": the aggregate read, "figures": {...}}
    tokens_per_month: int
    cost_micros_per_month: int
    currency: str
    action: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        cost = Decimal(self.cost_micros_per_month).scaleb(-6)
        return {
            "kind": self.kind, "tenant": self.tenant, "app": self.app, "model": self.model,
            "title": self.title, "evidence": self.evidence,
            "saving": {"tokens_per_month": self.tokens_per_month,
                       "cost_micros_per_month": self.cost_micros_per_month,
                       "cost_per_month": str(cost), "currency": self.currency},
            "action": self.action, **({"details": self.details} if self.details else {}),
        }
