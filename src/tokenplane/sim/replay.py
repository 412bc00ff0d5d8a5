"""Replay of recorded traffic through a config, in virtual time (docs/SLO.md, "Replay").

``run_replay(workload, setup)`` runs the requests of the ledger (``replay_workload``)
through one config: its admission (limits and budgets, ``replay_admission``), then, per
model alias, the simulated cluster (``ClusterSim``: the config's routing profile, its
gateway queue and SLO classes, budget-protecting admission when an SLO asks) with as
many replicas as the alias has backends. It returns what the config would have done:
requests refused per tenant and why, tokens by source and cost per tenant, SLO
attainment and budget spent per SLO, goodput and replica load. ``recorded(workload)``
is the same account of what the ledger says happened; ``diff`` puts two side by side.

What is simulated and what is carried: a request that reached an upstream is run on
the engines with its recorded prompt and output lengths and prefix fingerprints (its
tokens are the recorded ones; its timing is the simulator's; a recorded upstream fault
or cancellation stays one). A request that never reached one for another reason than
admission (a client mistake) is carried as recorded. A request the ledger recorded as
refused that this config admits runs with its counted prompt and the config's default
output length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tokenplane.engine.profiles import get_profile
from tokenplane.metering.pricing import PriceBook
from tokenplane.scheduling.slo import SloClass
from tokenplane.sim.cluster import ClusterConfig, ClusterSim, PolicySpec, RequestRecord
from tokenplane.sim.replay_admission import AdmissionSetup, Refusal, admit, cost_micros
from tokenplane.sim.replay_workload import ReplayRequest, token_sources
from tokenplane.sim.slo_results import slo_tallies
from tokenplane.sim.workload import SimRequest
from tokenplane.slo.facts import facts_from_event
from tokenplane.slo.protection import BudgetProtection, ProtectSpec
from tokenplane.slo.spec import Slo
from tokenplane.slo.verdict import RequestFacts

TOKEN_KINDS = ("system", "history", "context", "tools", "user", "unrecorded", "cached",
               "output", "reasoning")


@dataclass(frozen=True, slots=True)
class ModelSetup:
    """One model alias of a config: its simulated replicas and routing policy."""

    alias: str
    policy: PolicySpec
    cluster: ClusterConfig


@dataclass(frozen=True, slots=True)
class ClassRules:
    """How a config picks a request's SLO class when the recorded one is not among its
    classes: by key, by app, by tenant, else the default (``scheduling``)."""

    default: str = "interactive"
    by_key: Mapping[str, str] = field(default_factory=dict)
    by_app: Mapping[str, str] = field(default_factory=dict)
    by_tenant: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplaySetup:
    """Everything of one config that replay runs."""

    name: str
    models: Mapping[str, ModelSetup]
    classes: Mapping[str, SloClass]
    admission: AdmissionSetup
    class_rules: ClassRules = field(default_factory=ClassRules)
    slos: Sequence[Slo] = ()
    protect: Sequence[ProtectSpec] = ()
    prices: PriceBook | None = None
    engine_profile: str = "llama3-8b-a100"


def slo_class_of(r: ReplayRequest, setup: ReplaySetup) -> str:
    e = r.event
    if e.slo_class and e.slo_class in setup.classes:
        return e.slo_class
    rules = setup.class_rules
    for table, k in ((rules.by_key, e.key_id), (rules.by_app, e.app),
                     (rules.by_tenant, e.tenant)):
        if k and k in table:
            return table[k]
    return rules.default


def _tenant_row() -> dict[str, Any]:
    return {"requests": 0, "admitted": 0, "refused": {}, "refused_by": {},
            "tokens": dict.fromkeys(TOKEN_KINDS, 0), "cost_micros": 0}


def recorded(workload: Sequence[ReplayRequest], slos: Sequence[Slo] = ()) -> dict[str, Any]:
    """What the ledger says happened: per tenant requests, refusals by code, tokens by
    source and cost (the recorded prices), and ``slos`` judged on the recorded facts
    (what ``tokenplane slo status`` counts)."""
    tenants: dict[str, dict[str, Any]] = {}
    for r in workload:
        e = r.event
        row = tenants.setdefault(e.tenant, _tenant_row())
        row["requests"] += 1
        if r.refused:
            code = e.error_code or ""
            row["refused"][code] = row["refused"].get(code, 0) + 1
            continue
        row["admitted"] += 1
        _add_tokens(row["tokens"], token_sources(e))
        row["cost_micros"] += e.cost_micros
    facts = [facts_from_event(r.event, r.event.slo_class or "") for r in workload]
    return {"tenants": _sorted(tenants), "totals": _totals(tenants),
            "slos": slo_tallies(slos, facts)}


def run_replay(workload: Sequence[ReplayRequest], setup: ReplaySetup) -> dict[str, Any]:
    """What ``setup`` would have done with the recorded workload (see module doc)."""
    refusals = admit(workload, setup.admission)
    t0 = workload[0].arrival if workload else 0.0
    t_end = max((r.event.ts for r in workload), default=t0)
    classes: dict[str, str] = {r.request_id: slo_class_of(r, setup) for r in workload}
    by_alias: dict[str, list[SimRequest]] = {}
    for r in workload:
        if r.request_id in refusals or r.event.model not in setup.models:
            continue
        if not (r.reached_upstream or r.refused):
            continue
        e = r.event
        output = e.output_tokens if not r.refused else setup.admission.default_output_tokens
        by_alias.setdefault(e.model, []).append(SimRequest(
            request_id=r.request_id, arrival=r.arrival - t0,
            prompt_tokens=max(1, r.prompt_tokens), output_tokens=max(1, output),
            block_hashes=r.block_hashes(), tenant=e.tenant, slo_class=classes[r.request_id]))
    records: dict[str, RequestRecord] = {}
    models: dict[str, Any] = {}
    prof = get_profile(setup.engine_profile)
    for alias, reqs in sorted(by_alias.items()):
        m = setup.models[alias]
        protection = BudgetProtection(setup.protect, setup.slos) if setup.protect else None
        sim = ClusterSim(m.policy, prof, setup.classes, m.cluster, protection=protection,
                         alias=alias)
        sim.run(reqs)
        records.update(sim.records)
        models[alias] = _model_summary(alias, m, sim, max(1e-3, t_end - t0))
    tenants: dict[str, dict[str, Any]] = {}
    facts: list[RequestFacts] = []
    met = 0
    for r in workload:
        e = r.event
        row = tenants.setdefault(e.tenant, _tenant_row())
        row["requests"] += 1
        cls = classes[r.request_id]
        refusal = refusals.get(r.request_id)
        if refusal is None and e.model not in setup.models:
            refusal = Refusal("model_not_found", f"model:{e.model}", "")
        if refusal is not None:
            row["refused"][refusal.code] = row["refused"].get(refusal.code, 0) + 1
            which = f"{refusal.scope} {refusal.limit}".strip()
            row["refused_by"][which] = row["refused_by"].get(which, 0) + 1
            facts.append(_refused_facts(r, cls, refusal))
            continue
        row["admitted"] += 1
        rec = records.get(r.request_id)
        if r.refused:  # admitted now; the ledger has no usage for it
            assert rec is not None
            tokens = dict.fromkeys(TOKEN_KINDS, 0)
            tokens["unrecorded"] = rec.req.prompt_tokens
            tokens["output"] = rec.req.output_tokens
            _add_tokens(row["tokens"], tokens)
            row["cost_micros"] += cost_micros(setup.prices, e.model, rec.req.prompt_tokens,
                                              rec.req.output_tokens)
        else:
            _add_tokens(row["tokens"], token_sources(e))
            row["cost_micros"] += cost_micros(setup.prices, e.model, e.input_tokens,
                                              e.output_tokens, e.cached_input_tokens,
                                              e.reasoning_tokens)
        if rec is not None and (e.status == "ok" or r.refused):
            facts.append(replace(rec.facts(e.model), department=e.department, app=e.app,
                                 stream=e.stream, ts=rec.finish + t0 if rec.done else e.ts))
            met += rec.met_slo()
        else:
            facts.append(facts_from_event(e, cls))
    span = max(1e-3, t_end - t0)
    return {
        "config": setup.name,
        "tenants": _sorted(tenants),
        "totals": _totals(tenants),
        "slos": slo_tallies(setup.slos, facts),
        "goodput_rps": met / span,
        "span_s": span,
        "models": models,
        "refusals": {rid: {"code": f.code, "scope": f.scope, "limit": f.limit}
                     for rid, f in sorted(refusals.items())},
    }


def _model_summary(alias: str, m: ModelSetup, sim: ClusterSim, span: float) -> dict[str, Any]:
    recs = list(sim.records.values())
    done = [r for r in recs if r.done and not r.shed]
    replicas = []
    for i in range(m.cluster.replicas):
        mine = [r for r in done if r.endpoint == i]
        replicas.append({
            "replica": i, "requests": len(mine),
            "prompt_tokens": sum(r.req.prompt_tokens for r in mine),
            "output_tokens": sum(r.output_tokens for r in mine),
            "cached_tokens": sum(r.cached_tokens for r in mine),
        })
    prompt = sum(r.req.prompt_tokens for r in done)
    return {
        "policy": m.policy.name, "replicas": m.cluster.replicas,
        "requests": len(recs), "completed": len(done),
        "shed": sum(1 for r in recs if r.shed),
        "slo_attainment": sum(r.met_slo() for r in recs) / len(recs) if recs else 1.0,
        "goodput_rps": sum(r.met_slo() for r in recs) / span,
        "prefix_hit_rate": sum(r.cached_tokens for r in done) / prompt if prompt else 0.0,
        "replica_load": replicas,
    }


def _refused_facts(r: ReplayRequest, cls: str, refusal: Refusal) -> RequestFacts:
    e = r.event
    return RequestFacts(ts=r.arrival, model=e.model, tenant=e.tenant,
                        department=e.department, app=e.app, slo_class=cls, status="error",
                        http_status=429 if refusal.code != "model_not_found" else 404,
                        error_code=refusal.code, stream=e.stream, ttft_s=None,
                        tpot_s=None, latency_s=None)


def _add_tokens(into: dict[str, int], add: Mapping[str, int]) -> None:
    for k, v in add.items():
        into[k] = into.get(k, 0) + v


def _sorted(tenants: Mapping[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for name in sorted(tenants):
        row = dict(tenants[name])
        row["refused"] = dict(sorted(row["refused"].items()))
        row["refused_by"] = dict(sorted(row["refused_by"].items()))
        out[name] = row
    return out


def _totals(tenants: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    tot = _tenant_row()
    for row in tenants.values():
        tot["requests"] += row["requests"]
        tot["admitted"] += row["admitted"]
        tot["cost_micros"] += row["cost_micros"]
        _add_tokens(tot["tokens"], row["tokens"])
        for code, n in row["refused"].items():
            tot["refused"][code] = tot["refused"].get(code, 0) + n
    tot["refused"] = dict(sorted(tot["refused"].items()))
    del tot["refused_by"]
    return tot


def diff_rows(current: Mapping[str, Any], proposed: Mapping[str, Any],
              recorded_view: Mapping[str, Any] | None = None) -> list[tuple[str, Any, Any, Any]]:
    """Side-by-side rows ``(what, recorded, current, proposed)`` of two replays (and
    the ledger's own account where it has the figure)."""
    rows: list[tuple[str, Any, Any, Any]] = []
    rec = recorded_view or {}

    def add(label: str, path: Sequence[str], with_recorded: bool = True) -> None:
        rows.append((label, _get(rec, path) if with_recorded else None,
                     _get(current, path), _get(proposed, path)))

    add("requests", ("totals", "requests"))
    add("admitted", ("totals", "admitted"))
    codes = sorted(set(_keys(rec, ("totals", "refused"))) | set(_keys(current, ("totals",
                   "refused"))) | set(_keys(proposed, ("totals", "refused"))))
    for code in codes:
        add(f"refused {code}", ("totals", "refused", code))
    tenants = sorted(set(_keys(current, ("tenants",))) | set(_keys(proposed, ("tenants",))))
    for t in tenants:
        add(f"{t}: requests", ("tenants", t, "requests"))
        tcodes = sorted(set(_keys(rec, ("tenants", t, "refused")))
                        | set(_keys(current, ("tenants", t, "refused")))
                        | set(_keys(proposed, ("tenants", t, "refused"))))
        for code in tcodes:
            add(f"{t}: refused {code}", ("tenants", t, "refused", code))
        for which in sorted(set(_keys(current, ("tenants", t, "refused_by")))
                            | set(_keys(proposed, ("tenants", t, "refused_by")))):
            add(f"{t}: refused by {which}", ("tenants", t, "refused_by", which),
                with_recorded=False)
        for kind in TOKEN_KINDS:
            add(f"{t}: tokens {kind}", ("tenants", t, "tokens", kind))
        add(f"{t}: cost_micros", ("tenants", t, "cost_micros"))
    add("goodput_rps", ("goodput_rps",), with_recorded=False)
    slos = sorted(set(_keys(current, ("slos",))) | set(_keys(proposed, ("slos",))))
    for s in slos:
        slis = sorted(set(_keys(current, ("slos", s))) | set(_keys(proposed, ("slos", s))))
        for sli in slis:
            add(f"slo {s}/{sli} sli", ("slos", s, sli, "sli"))
            add(f"slo {s}/{sli} budget_spent", ("slos", s, sli, "budget_spent"),
                with_recorded=False)
            add(f"slo {s}/{sli} burn_rate", ("slos", s, sli, "burn_rate"),
                with_recorded=False)
    for alias in sorted(set(_keys(current, ("models",))) | set(_keys(proposed, ("models",)))):
        for k in ("replicas", "completed", "shed", "slo_attainment", "prefix_hit_rate"):
            add(f"model {alias}: {k}", ("models", alias, k), with_recorded=False)
        for side in (current, proposed):
            for rep in _get(side, ("models", alias, "replica_load")) or []:
                i = rep["replica"]
                label = f"model {alias}: replica {i} requests"
                if not any(row[0] == label for row in rows):
                    rows.append((label, None,
                                 _replica(current, alias, i), _replica(proposed, alias, i)))
    keep = ("requests", "admitted")
    return [row for row in rows
            if row[0] in keep or any(v is not None and v != 0 for v in row[1:])]


def _replica(side: Mapping[str, Any], alias: str, i: int) -> int | None:
    for rep in _get(side, ("models", alias, "replica_load")) or []:
        if rep["replica"] == i:
            return int(rep["requests"])
    return None


def _get(d: Any, path: Sequence[str]) -> Any:
    for p in path:
        if not isinstance(d, Mapping) or p not in d:
            return None
        d = d[p]
    return d


def _keys(d: Any, path: Sequence[str]) -> list[str]:
    got = _get(d, path)
    return list(got) if isinstance(got, Mapping) else []


def format_diff(rows: Sequence[tuple[str, Any, Any, Any]], names: tuple[str, str]) -> str:
    """The diff as a fixed-width table."""
    def fmt(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4f}"
        return str(v)

    head = ("", "recorded", names[0], names[1], "change")
    body = []
    for label, rec, cur, prop in rows:
        change = ""
        if isinstance(cur, int | float) and isinstance(prop, int | float):
            delta = prop - cur
            change = "" if delta == 0 else (f"{delta:+.4f}" if isinstance(delta, float)
                                            else f"{delta:+d}")
        body.append((label, fmt(rec), fmt(cur), fmt(prop), change))
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(5)]
    lines = ["  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                       for i, c in enumerate(row)) for row in [head, *body]]
    return "\n".join(lines)
