"""``tokenplane simulate``: replay a trace through the real routing and scheduling
code against simulated replicas in virtual time."""

from __future__ import annotations

from typing import Annotated, Any

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def simulate(
        trace: Annotated[str, typer.Option(help="Azure CSV or Mooncake JSONL trace.")],
        out: Annotated[str, typer.Option(help="Directory for results.json and plots.")],
        replicas: Annotated[int, typer.Option(help="Simulated engine replicas.")] = 8,
        profile: Annotated[str, typer.Option(help="Engine profile.")] = "llama3-8b-a100",
        policies: Annotated[str, typer.Option(help="Comma-separated policies.")] = (
            "round-robin,least-requests,sglang-cache-aware,vllm-fcfs,tokenplane"
        ),
        load: Annotated[str, typer.Option(help="Load factors: start:stop:step or a,b,c "
                                          "(multiplies the trace's request rate).")] = "1.0",
        seed: Annotated[int, typer.Option(help="Seed for classes, tenants and jitter.")] = 0,
        start: Annotated[float, typer.Option(help="Start of the trace slice (s).")] = 0.0,
        duration: Annotated[float | None, typer.Option(help="Length of the trace slice "
                                                       "(s); default: all.")] = None,
        plots: Annotated[bool, typer.Option(help="Write PNG plots.")] = True,
        config: Annotated[str | None, typer.Option(
            help="Gateway config: its SLO classes (scheduling.classes) and SLOs (slos:), "
                 "judged as its first model alias.")] = None,
        bisect: Annotated[bool, typer.Option(
            help="Find each policy's goodput knee: search beyond the loads given and "
                 "bisect to --precision.")] = False,
        precision: Annotated[float, typer.Option(
            help="Relative precision of the bisected goodput.")] = 0.02,
        autoscale: Annotated[str | None, typer.Option(
            help="Simulate a day per autoscaling policy instead (comma-separated: "
                 "tokenplane, static-peak, static-mean, hpa-kv, keda-queue, "
                 "aibrix-kpa).")] = None,
        shape: Annotated[str, typer.Option(
            help="--autoscale: the day's rate curve (diurnal).")] = "diurnal",
        day_hours: Annotated[float, typer.Option(
            help="--autoscale: compress the day's curve into this many hours "
                 "(cold starts and policy constants unchanged).")] = 24.0,
        rate_scale: Annotated[float, typer.Option(
            help="--autoscale: time dilation k: engine step times and SLO latency "
                 "targets x k, request rate / k (k times fewer requests).")] = 1.0,
        peak_rps: Annotated[float | None, typer.Option(
            help="--autoscale: peak request rate (default: what --max-replicas "
                 "serve at 70% of their token capacity).")] = None,
        max_replicas: Annotated[int, typer.Option(
            help="--autoscale: the pool's maximum (and static-peak's) replicas.")] = 8,
        jobs: Annotated[int, typer.Option(
            help="--autoscale: policies simulated in parallel processes.")] = 1,
    ) -> None:
        """Measure routing and scheduling policies on a trace; writes OUT/results.json.
        With --autoscale: a simulated day of traffic per autoscaling policy."""
        if autoscale is not None:
            _autoscale_day(trace, out, autoscale, shape=shape, day_hours=day_hours,
                           rate_scale=rate_scale, peak_rps=peak_rps, profile=profile,
                           max_replicas=max_replicas, seed=seed, jobs=jobs, plots=plots)
            return
        from tokenplane.compose.config_file import ConfigError, load_config
        from tokenplane.scheduling.slo import slo_classes_from_config
        from tokenplane.sim.runner import parse_loads, run_simulation
        from tokenplane.slo.protection import protect_spec
        from tokenplane.slo.spec import slo_from_config

        classes = slos = protect = None
        alias = "sim"
        if config is not None:
            try:
                cfg = load_config(config)
            except ConfigError as exc:
                typer.echo(str(exc), err=True)
                raise typer.Exit(2) from None
            classes = slo_classes_from_config(cfg.scheduling.class_specs())
            slos = [slo_from_config(s) for s in cfg.slos]
            protect = [protect_spec(s.name, s.protect, classes) for s in cfg.slos
                       if s.protect is not None]
            alias = cfg.models[0].alias

        try:
            loads = parse_loads(load)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--load") from None
        names = [p.strip() for p in policies.split(",") if p.strip()]

        from tokenplane.cli.progress import Progress

        bar = Progress("simulate", None if bisect else len(names) * len(loads))

        def progress(name: str, factor: float, point: dict[str, Any]) -> None:
            bar.step(f"{name} load {factor:g}x done in {point.get('sim_wall_s')} s; "
                     + verdict(point))

        try:
            with bar:
                results = run_simulation(
                    trace, replicas=replicas, profile=profile, policies=names, loads=loads,
                    seed=seed, out_dir=out, start_s=start, duration_s=duration, plots=plots,
                    progress=progress, classes=classes, slos=slos or (), alias=alias,
                    bisect=bisect, rel_tol=precision, protect=protect or (),
                )
        except (ValueError, KeyError, OSError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        for name, res in results["policies"].items():
            g = res["goodput"]
            if g["bound"] == "below":
                note, shown = "no load tried passed: below the lowest", "-"
            else:
                shown = f"{res['goodput_rps']:.4g} req/s"
                note = (f"at least: every load tried passed (up to {g['load_pass']:g}x)"
                        if g["bound"] == "capped" else
                        f"knee between {g['load_pass']:g}x and {g['load_fail']:g}x")
            typer.echo(f"{name:>20} goodput {shown} ({note})")
            for point in res["points"]:
                typer.echo(f"{'':>20}   load {float(point['load']):g}x: {verdict(point)}")
        typer.echo(f"wrote {out}/results.json")


def verdict(point: dict[str, Any]) -> str:
    """A load's attainment in 4 significant digits and whether it passed (and which
    configured SLOs it missed)."""
    from tokenplane.sim.metrics import failed_slos, passes

    att = point.get("slo_attainment")
    if att is None:
        return "no attainment"
    missed = failed_slos(point)
    state = "passed" if passes(point) else (
        f"failed: {', '.join(missed)} missed" if missed else "failed: below 0.9")
    return f"attainment {float(att):.4g}, {state}"


def _autoscale_day(trace: str, out: str, names: str, *, shape: str, day_hours: float,
                   rate_scale: float, peak_rps: float | None, profile: str,
                   max_replicas: int, seed: int, jobs: int, plots: bool) -> None:
    from tokenplane.autoscale.spec import PoolPolicySpec
    from tokenplane.sim.autoscale_run import DayConfig, run_day

    if shape != "diurnal":
        raise typer.BadParameter("the only shape is 'diurnal'", param_hint="--shape")
    policies = [p.strip() for p in names.split(",") if p.strip()]

    def progress(name: str, r: dict[str, Any]) -> None:
        typer.echo(f"{name:>12} replica-hours {r['replica_hours_serving']:.1f} serving + "
                   f"{r['replica_hours_warm']:.1f} warm; interactive attainment "
                   f"{r['interactive_attainment']:.4f}; {r['minutes_below_target']} min "
                   f"below target; {r['reversals']} reversals ({r['sim_wall_s']} s)")

    try:
        cfg = DayConfig(profile=profile, spec=PoolPolicySpec(max_replicas=max_replicas),
                        peak_rps=peak_rps, rate_scale=rate_scale, day_hours=day_hours,
                        seed=seed, jobs=jobs)
        run_day(trace, policies, out, cfg, plots=plots, progress=progress)
    except (ValueError, KeyError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"wrote {out}/results.json")
