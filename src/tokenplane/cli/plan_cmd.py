"""``tokenplane plan``: replicas per hour of the day that meet the SLOs, with headroom,
monthly cost and a plot, from a trace or the ledger; "what if" scenarios side by side
(docs/CAPACITY.md).

    tokenplane plan (--trace FILE | --from-ledger --since 7d) --profile NAME
                    [--slo config.yaml] [--growth 1.3] [--headroom 0.2]
                    [--price-per-replica-hour X] [--what-if h100:profile=llama3-8b-h100]
                    --out DIR
"""

from __future__ import annotations

import asyncio
import json
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any

import typer

from tokenplane.cli.usage_cmd import DbUrl, Home, ledger_target

SCHEMA_VERSION = 1


def register(app: typer.Typer) -> None:
    @app.command()
    def plan(
        out: Annotated[str, typer.Option(help="Directory for plan.json, plan.txt, plan.png.")],
        trace: Annotated[str | None, typer.Option(help="Azure CSV or Mooncake JSONL.")] = None,
        from_ledger: Annotated[bool, typer.Option(
            "--from-ledger", help="Plan for the requests the ledger recorded.")] = False,
        since: Annotated[str, typer.Option(help="With --from-ledger: start (epoch, ISO "
                                           "time or an age such as 7d).")] = "7d",
        until: Annotated[str | None, typer.Option(help="With --from-ledger: end.")] = None,
        profile: Annotated[str, typer.Option(help="Engine profile.")] = "llama3-8b-a100",
        slo: Annotated[str | None, typer.Option(
            help="Gateway config whose slos: and SLO classes are the target (default: "
                 "interactive TTFT within 1 s for 99% of requests).")] = None,
        growth: Annotated[float, typer.Option(help="Traffic growth (1.3 = 30% more "
                                              "requests per second).")] = 1.0,
        headroom: Annotated[float, typer.Option(help="Spare capacity on top of what "
                                                "the SLOs need (0.2 = 20%).")] = 0.2,
        price_per_replica_hour: Annotated[str | None, typer.Option(
            help="Price of one replica for one hour (decimal).")] = None,
        what_if: Annotated[list[str] | None, typer.Option(
            help="Another scenario: name:key=value,... (profile, growth, prefix_cache "
                 "on|off); repeatable.")] = None,
        shape: Annotated[str | None, typer.Option(
            help="diurnal: resample the trace into a day under the documented time-of-day "
                 "curve (sim/diurnal.py), peaking at --peak-rps.")] = None,
        peak_rps: Annotated[float, typer.Option(
            help="With --shape diurnal: requests per second at the day's peak.")] = 10.0,
        hours: Annotated[str | None, typer.Option(
            help="Plan only these hours of the day (8,9,10 or 8-12).")] = None,
        start_hour: Annotated[int, typer.Option(help="Hour of the day a trace starts "
                                                "at.")] = 0,
        batch_fraction: Annotated[float, typer.Option(
            help="Share of a trace's requests in the batch class.")] = 0.0,
        max_replicas: Annotated[int, typer.Option(help="Give up above this many.")] = 256,
        seed: Annotated[int, typer.Option(help="Seed of the simulated cluster.")] = 0,
        home: Home = None,
        database_url: DbUrl = None,
    ) -> None:
        """Find the replicas needed per hour of the day and at peak to meet the SLOs."""
        from tokenplane.engine.profiles import get_profile
        from tokenplane.sim.plan import Scenario, hour_buckets, parse_what_if, plan_scenario
        from tokenplane.sim.plan_plot import write_plan_plot

        if (trace is None) == (not from_ledger):
            raise typer.BadParameter("give exactly one of --trace or --from-ledger",
                                     param_hint="--trace")
        if shape not in (None, "diurnal"):
            raise typer.BadParameter("the one shape is diurnal", param_hint="--shape")
        if shape is not None and trace is None:
            raise typer.BadParameter("--shape reshapes a --trace", param_hint="--shape")
        if not peak_rps > 0:
            raise typer.BadParameter("must be positive", param_hint="--peak-rps")
        wanted = _hours(hours)
        if not 0 <= start_hour < 24:
            raise typer.BadParameter("an hour of the day, 0-23", param_hint="--start-hour")
        if headroom < 0:
            raise typer.BadParameter("must be >= 0", param_hint="--headroom")
        if max_replicas < 1:
            raise typer.BadParameter("must be >= 1", param_hint="--max-replicas")
        price = None
        if price_per_replica_hour is not None:
            try:
                price = Decimal(price_per_replica_hour)
            except InvalidOperation:
                price = None
            if price is None or not price.is_finite() or price < 0:
                raise typer.BadParameter("a decimal price >= 0",
                                         param_hint="--price-per-replica-hour")
        try:
            base = Scenario("base", get_profile(profile), growth)
            scenarios = [base] + [parse_what_if(w, base, get_profile) for w in what_if or []]
        except (KeyError, ValueError) as exc:
            raise typer.BadParameter(str(exc).strip('"'), param_hint="--what-if") from None
        names = [s.name for s in scenarios]
        if len(set(names)) != len(names):
            raise typer.BadParameter("scenario names must differ", param_hint="--what-if")
        target = _target(slo)
        if trace is not None:
            reqs = _trace_requests(trace, batch_fraction, seed, target.classes,
                                   peak_rps if shape == "diurnal" else None)
            epoch = False
        else:
            reqs = _ledger_requests(home, database_url, since, until, target)
            epoch = True
        if not reqs:
            typer.echo("error: no requests to plan for", err=True)
            raise typer.Exit(2)
        buckets = hour_buckets(reqs, epoch=epoch, start_hour=start_hour)
        if wanted is not None:
            buckets = {h: r for h, r in buckets.items() if h in wanted}
        from tokenplane.cli.progress import Progress

        bar = Progress(f"plan: {len(reqs)} requests, {len(buckets)} hours of the day",
                       len(buckets) * len(scenarios))

        def progress(name: str, hour: int, needed: int) -> None:
            bar.step(f"{name} hour {hour:02d}: {needed} replicas needed")

        t0 = time.perf_counter()
        plans: dict[str, Any] = {}
        try:
            with bar:
                for sc in scenarios:
                    plans[sc.name] = plan_scenario(
                        buckets, sc, target, headroom=headroom,
                        price_per_replica_hour=price, max_replicas=max_replicas, seed=seed,
                        progress=progress)
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        result = {
            "schema_version": SCHEMA_VERSION, "source": trace or "ledger",
            "requests": len(reqs),
            "target": [{"slo": s.name, "objective": s.objective,
                        "slis": [sli.label for sli in s.slis]} for s in target.slos],
            "scenarios": plans, "wall_s": round(time.perf_counter() - t0, 2),
        }
        (d / "plan.json").write_text(json.dumps(result, indent=2))
        table = format_plan(plans)
        (d / "plan.txt").write_text(table + "\n")
        write_plan_plot(plans, d / "plan.png")
        typer.echo(table)
        typer.echo(f"wrote {d}/plan.json, plan.txt, plan.png")


def format_plan(plans: dict[str, Any]) -> str:
    """Hours as rows, scenarios as columns (recommended, needed in brackets), then the
    peak and monthly cost of each."""
    names = list(plans)
    hours = sorted({h["hour"] for p in plans.values() for h in p["hours"]})
    by = {n: {h["hour"]: h for h in p["hours"]} for n, p in plans.items()}
    lines = ["hour  " + "  ".join(f"{n:>18}" for n in names)]
    for hour in hours:
        cells = []
        for n in names:
            h = by[n].get(hour)
            cell = "-" if h is None else f"{h['recommended']} ({h['needed']})"
            cells.append(f"{cell:>18}")
        lines.append(f"{hour:02d}    " + "  ".join(cells))
    lines.append("peak  " + "  ".join(
        f"{plans[n]['peak']['recommended']:>18}" for n in names))
    if all("cost_per_month" in plans[n] for n in names):
        lines.append("$/mo  " + "  ".join(f"{plans[n]['cost_per_month']:>18}" for n in names))
        bases = {plans[n]["cost_basis"] for n in names}
        lines.append("$/mo: a whole month, 24 hours a day; " + "; ".join(sorted(bases)))
    return "\n".join(lines)


def _target(path: str | None) -> Any:
    from tokenplane.scheduling.slo import default_slo_classes, slo_classes_from_config
    from tokenplane.sim.plan import Target
    from tokenplane.slo.spec import Selector, Sli, SliKind, Slo, default_rules, slo_from_config

    if path is None:
        window = 30 * 86400.0
        slo = Slo("interactive-ttft", Selector(slo_class="interactive"),
                  (Sli(SliKind.TTFT, 1.0),), 0.99, window, default_rules(window, 0.99))
        return Target((slo,), default_slo_classes())
    from tokenplane.compose.config_file import ConfigError, load_config

    try:
        cfg = load_config(path)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    if not cfg.slos:
        raise typer.BadParameter(f"{path} has no slos:", param_hint="--slo")
    return Target(tuple(slo_from_config(s) for s in cfg.slos),
                  slo_classes_from_config(cfg.scheduling.class_specs()), cfg.models[0].alias)


def _hours(spec: str | None) -> set[int] | None:
    """``8,9,10`` or ``8-12`` (both ends included) -> hours of the day."""
    if spec is None:
        return None
    out: set[int] = set()
    try:
        for part in (p.strip() for p in spec.split(",") if p.strip()):
            lo, dash, hi = part.partition("-")
            first, last = int(lo), int(hi) if dash else int(lo)
            if not 0 <= first <= last < 24:
                raise ValueError(part)
            out.update(range(first, last + 1))
    except ValueError:
        raise typer.BadParameter("hours of the day: 8,9,10 or 8-12 (0-23)",
                                 param_hint="--hours") from None
    if not out:
        raise typer.BadParameter("no hours given", param_hint="--hours")
    return out


def _trace_requests(path: str, batch_fraction: float, seed: int, classes: Any,
                    diurnal_peak_rps: float | None = None) -> list[Any]:
    from tokenplane.sim.traces import load_trace
    from tokenplane.sim.workload import WorkloadRules, assign

    if "interactive" not in classes or ("batch" not in classes and batch_fraction > 0):
        raise typer.BadParameter("a trace's requests are labelled interactive and batch; "
                                 "the --slo config has no such classes", param_hint="--slo")
    try:
        trace = load_trace(path)
        if diurnal_peak_rps is not None:
            from tokenplane.sim.diurnal import RateCurve, resample_trace

            trace = resample_trace(trace, RateCurve(diurnal_peak_rps).rate, seed=seed)
        return assign(trace, WorkloadRules(batch_fraction=batch_fraction, seed=seed))
    except (OSError, ValueError, KeyError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--trace") from None


def _ledger_requests(home: str | None, url: str | None, since: str, until: str | None,
                     target: Any) -> list[Any]:
    from tokenplane.cli.replay_cmd import _read_workload
    from tokenplane.metering.reports import parse_time_bound
    from tokenplane.sim.workload import SimRequest

    now = time.time()
    try:
        t_since = parse_time_bound(since, now)
        t_until = parse_time_bound(until, now) if until is not None else now
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since/--until") from None
    workload = asyncio.run(_read_workload(ledger_target(home, url), t_since, t_until, None))
    default = "interactive" if "interactive" in target.classes else next(iter(target.classes))
    out = []
    for r in workload:
        if r.refused or not r.reached_upstream:
            continue  # refused at admission: no replica served it
        e = r.event
        cls = e.slo_class if e.slo_class in target.classes else default
        out.append(SimRequest(r.request_id, r.arrival, max(1, r.prompt_tokens),
                              max(1, e.output_tokens), r.block_hashes(),
                              e.tenant or "", cls))
    return out
