"""The policy's view of an SLO: what it selects, its SLIs, objective, window and
alert rules, built from the ``slos:`` config section."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tokenplane.config.slo_schema import BurnAlertConfig, SloConfig

THIRTY_DAYS_S = 30 * 86400.0


class SliKind(StrEnum):
    TTFT = "ttft"  # time to first token of a streamed request
    TPOT = "tpot"  # time per output token after the first
    LATENCY = "latency"  # end to end, non-stream requests
    AVAILABILITY = "availability"  # not a gateway or upstream fault


@dataclass(frozen=True, slots=True)
class Selector:
    """Every field that is set must equal the request's; an empty selector takes all."""

    model: str | None = None
    tenant: str | None = None
    department: str | None = None
    app: str | None = None
    slo_class: str | None = None

    def selects(
        self, model: str, tenant: str, department: str, app: str, slo_class: str
    ) -> bool:
        return (
            (self.model is None or self.model == model)
            and (self.tenant is None or self.tenant == tenant)
            and (self.department is None or self.department == department)
            and (self.app is None or self.app == app)
            and (self.slo_class is None or self.slo_class == slo_class)
        )


@dataclass(frozen=True, slots=True)
class Sli:
    kind: SliKind
    threshold_s: float | None = None

    @property
    def label(self) -> str:
        """Its name in series and rows (an SLO has at most one SLI of each kind)."""
        return self.kind.value


@dataclass(frozen=True, slots=True)
class BurnRule:
    """Fire ``severity`` while the burn rate exceeds ``burn_rate`` over both windows."""

    severity: str
    burn_rate: float
    long_s: float
    short_s: float


@dataclass(frozen=True, slots=True)
class Slo:
    name: str
    selector: Selector
    slis: tuple[Sli, ...]
    objective: float
    window_s: float
    rules: tuple[BurnRule, ...]
    description: str = ""

    @property
    def error_budget(self) -> float:
        """The share of valid events allowed to be bad."""
        return 1.0 - self.objective


# The SRE workbook's policy for a 30-day window, as (severity, share of the budget
# spent, long window, short window): page when 2% of the budget goes in 1 h (14.4x) or
# 5% in 6 h (6x), open a ticket when 10% goes in 3 days (1x).
WORKBOOK_RULES: tuple[tuple[str, float, float, float], ...] = (
    ("page", 0.02, 3600.0, 300.0),
    ("page", 0.05, 6 * 3600.0, 1800.0),
    ("ticket", 0.10, 3 * 86400.0, 6 * 3600.0),
)


def default_rules(window_s: float, objective: float) -> tuple[BurnRule, ...]:
    """The workbook's rules for any window: each rule keeps its share of the budget, so
    its burn rate is ``share * window / long_window`` (14.4, 6 and 1 for 30 days). A
    rule whose long window exceeds the SLO's window is dropped; a rate the objective
    cannot reach (all events bad burn at ``1 / (1 - objective)``) is lowered to 90% of
    that ceiling, so a total outage still pages."""
    ceiling = 1.0 / (1.0 - objective)
    rules = []
    for severity, share, long_s, short_s in WORKBOOK_RULES:
        if long_s > window_s:
            continue
        rate = min(share * window_s / long_s, 0.9 * ceiling)
        rules.append(BurnRule(severity, rate, long_s, short_s))
    return tuple(rules)


def _rule(cfg: BurnAlertConfig) -> BurnRule:
    return BurnRule(cfg.severity, cfg.burn_rate, cfg.long_window, cfg.short_window)


def slo_from_config(cfg: SloConfig) -> Slo:
    sel = cfg.selector
    rules = (
        default_rules(cfg.window, cfg.objective)
        if cfg.alerts is None
        else tuple(_rule(a) for a in cfg.alerts)
    )
    return Slo(
        name=cfg.name,
        selector=Selector(sel.model, sel.tenant, sel.department, sel.app, sel.slo_class),
        slis=tuple(Sli(SliKind(s.kind), s.threshold) for s in cfg.slis),
        objective=cfg.objective,
        window_s=cfg.window,
        rules=rules,
        description=cfg.description,
    )
