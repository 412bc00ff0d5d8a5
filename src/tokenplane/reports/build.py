"""The cost and compliance reports as documents (``reports.document``)."""

from __future__ import annotations

from tokenplane.metering.outcomes import OUTCOME_LABELS, OUTCOMES
from tokenplane.reports.compliance import ComplianceCounts
from tokenplane.reports.cost import SOURCES, CostReport, money
from tokenplane.reports.document import Chart, Document, Heading, Para, Table, bar_chart
from tokenplane.reports.gather import ComplianceReport


def _n(v: int) -> str:
    return f"{v:,}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def _change(r: CostReport) -> str:
    if r.total_micros == r.last_total_micros:
        return "no change"
    if r.last_total_micros == 0:
        return f"{money(r.total_micros - r.last_total_micros, signed=True)} (nothing last month)"
    return (f"{money(r.total_micros - r.last_total_micros, signed=True)} "
            f"({_pct(r.change_share)})")


def _scope(tenant: str | None) -> str:
    return f"tenant {tenant}" if tenant else "all tenants"


def cost_document(r: CostReport, *, charts: bool = True) -> Document:
    cur = r.currency
    doc = Document(f"Cost report {r.month}", f"{_scope(r.tenant)}; amounts in {cur}")
    f = r.forecast
    doc.add(
        Heading("Summary"),
        Table(("", "value"), (
            ("cost this month", money(r.total_micros)),
            (f"cost {r.month.previous()}", money(r.last_total_micros)),
            ("change", _change(r)),
            ("month-end forecast" if f.basis != "actual" else "month total",
             money(f.month_end_micros)),
            ("forecast basis", "the month is over" if f.basis == "actual" else
             f"{f.days_elapsed:.1f} days so far, then {money(f.daily_rate_micros)} a day "
             "(the last seven complete days' average)"),
            ("requests", _n(r.totals.get("requests", 0))),
            *((f"  {OUTCOME_LABELS[o]}", _n(r.totals.get(o, 0))) for o in OUTCOMES),
            ("input tokens", _n(r.totals.get("input_tokens", 0))),
            ("output tokens", _n(r.totals.get("output_tokens", 0))),
        ), (False, True)),
    )
    if charts and r.daily:
        doc.add(Chart(bar_chart([d[5:] for d, _ in r.daily],
                                [c / 1e6 for _, c in r.daily],
                                f"Cost per day, {r.month}", cur), "Cost per day"))
    doc.add(
        Heading("By tenant, department and app"),
        Table(("tenant", "department", "app", "requests", "input tokens", "output tokens",
               *[f"{s} tokens" for s in SOURCES], "cost", f"cost {r.month.previous()}",
               "change"),
              tuple((ln.tenant or "-", ln.department or "-", ln.app or "-", _n(ln.requests),
                     _n(ln.input_tokens), _n(ln.output_tokens),
                     *[_n(ln.by_source.get(s, 0)) for s in SOURCES],
                     money(ln.cost_micros), money(ln.last_cost_micros),
                     _pct(ln.change_micros / ln.last_cost_micros
                          if ln.last_cost_micros else None))
                    for ln in r.lines),
              (False, False, False) + (True,) * (3 + len(SOURCES) + 3)),
    )
    doc.add(Heading("By API and client"))
    if r.clients:
        doc.add(Table(("API", "client", "requests", "input tokens", "output tokens",
                       "share of tokens", "cost"),
                      tuple((c.api, c.client or "-", _n(c.requests), _n(c.input_tokens),
                             _n(c.output_tokens), f"{c.token_share * 100:.1f}%",
                             money(c.cost_micros)) for c in r.clients),
                      (False, False, True, True, True, True, True)))
    else:
        doc.add(Para("No requests by API and client this month (ledgers before migration "
                     "11 did not record them)."))
    doc.add(Heading("Top drivers of the change"))
    change = r.total_micros - r.last_total_micros
    if r.drivers:
        if change == 0:  # moves that cancel out: no share of a change of nothing
            doc.add(Para("No change in the total: these moves cancel out."))
        doc.add(Table(("tenant", "department", "app", "change", "share of the total change"),
                      tuple((d.tenant or "-", d.department or "-", d.app or "-",
                             money(d.change_micros, signed=True),
                             f"{d.change_micros / change * 100:.0f}%" if change else "-")
                            for d in r.drivers), (False, False, False, True, True)))
    else:
        doc.add(Para("No change: no tenant, department or app changed its spend."))
    doc.add(Heading("Savings realised"),
            Table(("by", "tokens", "saved", "note"),
                  tuple((s.what, _n(s.tokens), money(s.micros), s.note) for s in r.savings),
                  (False, True, True, False)))
    return doc


def _table_of(d: dict[str, int], key: str) -> Table:
    return Table((key, "count"), tuple((k, _n(v)) for k, v in
                                       sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))),
                 (False, True))


def compliance_document(r: ComplianceReport) -> Document:
    c: ComplianceCounts = r.counts
    doc = Document(f"Compliance report {r.month}", _scope(r.tenant))
    verdicts = c.by_verdict
    doc.add(
        Heading("Summary"),
        Table(("", "value"), (
            ("requests audited", _n(c.requests)),
            ("allowed", _n(verdicts.get("allow", 0))),
            ("flagged", _n(verdicts.get("flag", 0))),
            ("blocked", _n(verdicts.get("block", 0))),
            ("not screened (ended before governance: bad input, unknown model, ...)",
             _n(verdicts.get("unscreened", 0))),
            ("PII detections", _n(c.pii_total)),
            ("injection flags and blocks", _n(sum(c.injection_by_action.values()))),
            ("RAG documents flagged, dropped or blocked",
             _n(sum(c.injection_documents.values()))),
            ("tool calls denied", _n(sum(c.tools_denied.values()))),
        ), (False, True)),
        Heading("PII detections by type"),
    )
    actions = sorted({a for acts in c.pii_by_type.values() for a in acts})
    if c.pii_by_type:
        doc.add(Table(("type", *actions, "total"),
                      tuple((t, *[_n(acts.get(a, 0)) for a in actions], _n(sum(acts.values())))
                            for t, acts in sorted(c.pii_by_type.items())),
                      (False,) + (True,) * (len(actions) + 1)))
        types = sorted(c.pii_by_type)
        doc.add(Heading("PII detections by tenant"),
                Table(("tenant", *types),
                      tuple((t or "-", *[_n(by.get(x, 0)) for x in types])
                            for t, by in sorted(c.pii_by_tenant.items())),
                      (False,) + (True,) * len(types)))
        doc.add(Heading("Masking and blocks"), _table_of(c.pii_actions(), "action"))
    else:
        doc.add(Para("No PII was detected."))
    doc.add(Heading("Requests blocked, by reason"))
    doc.add(_table_of(c.blocks_by_code, "reason") if c.blocks_by_code else
            Para("No request was blocked."))
    doc.add(Heading("Injection screen"))
    if c.injection_by_action or c.injection_documents:
        if c.injection_by_action:
            doc.add(_table_of(c.injection_by_action, "action"))
        if c.injection_documents:
            doc.add(Para("RAG documents, by what the screen did with them:"),
                    _table_of(c.injection_documents, "document action"))
        doc.add(_table_of({t or "-": n for t, n in c.injection_by_tenant.items()}, "tenant"))
    else:
        doc.add(Para("No request was flagged or blocked by the injection screen."))
    doc.add(Heading("Denied tool calls"))
    if c.tools_denied:
        doc.add(_table_of(c.tools_denied, "tool"))
    else:
        doc.add(Para("No tool call was denied."))
    if c.tools_stripped:
        doc.add(Para(f"Tools removed from requests by policy: {_n(c.tools_stripped)}."))
    doc.add(Heading("Audit chain"), Para(r.key_note))
    rows = []
    for log in r.logs:
        res = log.result
        state = ("not verified" if res is None else "intact" if res.ok else
                 f"FAILED at record {res.first_bad_seq}: {res.reason}")
        rows.append((log.name, state, _n(res.records) if res else "-",
                     log.oldest_day or "-", log.newest_day or "-"))
    doc.add(Table(("log", "verification", "records", "oldest record", "newest record"),
                  tuple(rows), (False, False, True, False, False)) if rows
            else Para("No audit log was found."))
    keep = ("forever" if r.retention_days == 0 else f"{r.retention_days:g} days")
    doc.add(Heading("Retention"),
            Para(f"Content retention mode: {r.retention}; records are kept {keep}."))
    return doc
