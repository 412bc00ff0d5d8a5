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
    ) -> None:
        """Measure routing and scheduling policies on a trace; writes OUT/results.json."""
        from tokenplane.sim.runner import parse_loads, run_simulation

        try:
            loads = parse_loads(load)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--load") from None
        names = [p.strip() for p in policies.split(",") if p.strip()]

        def progress(name: str, factor: float, point: dict[str, Any]) -> None:
            att = point.get("slo_attainment", point.get("attainment"))
            typer.echo(f"{name:>20} load {factor:<5} done in {point.get('sim_wall_s')} s"
                       + (f"; attainment {att}" if att is not None else ""))

        try:
            results = run_simulation(
                trace, replicas=replicas, profile=profile, policies=names, loads=loads,
                seed=seed, out_dir=out, start_s=start, duration_s=duration, plots=plots,
                progress=progress,
            )
        except (ValueError, KeyError, OSError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        for name, res in results["policies"].items():
            typer.echo(f"{name:>20} goodput {res['goodput_rps']} req/s")
        typer.echo(f"wrote {out}/results.json")
