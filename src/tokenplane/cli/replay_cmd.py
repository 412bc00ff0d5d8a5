"""``tokenplane replay``: recorded traffic from the ledger through a changed config, in
virtual time (docs/SLO.md, "Replay").

    tokenplane replay --since 24h [--until T] [--tenant T] --config proposed.yaml
                      [--against current.yaml] [--limits L.yaml] [--against-limits L.yaml]
                      --out DIR
    tokenplane replay --since 24h --export trace.jsonl
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from tokenplane.cli.usage_cmd import DbUrl, Home, ledger_target

SCHEMA_VERSION = 1


def register(app: typer.Typer) -> None:
    @app.command()
    def replay(
        since: Annotated[str, typer.Option(help="Start: epoch, ISO time or an age (24h).")],
        until: Annotated[str | None, typer.Option(help="End (default: now).")] = None,
        tenant: Annotated[str | None, typer.Option(help="Only this tenant's requests.")
                          ] = None,
        config: Annotated[str | None, typer.Option(
            help="The proposed gateway config (YAML).")] = None,
        against: Annotated[str | None, typer.Option(
            help="The current gateway config, replayed side by side.")] = None,
        limits: Annotated[str | None, typer.Option(
            help="Limit changes for the proposed config (YAML list; on top of the "
                 "metadata database's).")] = None,
        against_limits: Annotated[str | None, typer.Option(
            help="Limit changes for the current config.")] = None,
        out: Annotated[str | None, typer.Option(help="Directory for replay.json and "
                                                "diff.txt.")] = None,
        export: Annotated[str | None, typer.Option(
            help="Write the workload as Mooncake-like JSONL (for `tokenplane "
                 "simulate`).")] = None,
        replicas: Annotated[int | None, typer.Option(
            help="Simulated replicas per model (default: its backends).")] = None,
        profile: Annotated[str, typer.Option(help="Engine profile.")] = "llama3-8b-a100",
        seed: Annotated[int, typer.Option(help="Seed of the simulated cluster.")] = 0,
        home: Home = None,
        database_url: DbUrl = None,
    ) -> None:
        """Replay recorded traffic through a config (and another side by side): SLOs,
        goodput, refusals, tokens and cost per tenant, replica load."""
        from tokenplane.admission.limits import LimitError
        from tokenplane.cli.common import data_dir
        from tokenplane.cli.replay_setup import (
            db_limits,
            limit_table,
            load_limit_changes,
            replay_setup,
        )
        from tokenplane.compose.config_file import ConfigError, load_config
        from tokenplane.meta.open_stores import database_url as env_database_url
        from tokenplane.metering.reports import parse_time_bound
        from tokenplane.sim.replay import diff_rows, format_diff, recorded
        from tokenplane.sim.replay_workload import mooncake_lines

        if config is None and export is None:
            raise typer.BadParameter("give --config (with --out) or --export",
                                     param_hint="--config")
        if config is not None and out is None:
            raise typer.BadParameter("--config needs --out", param_hint="--out")
        now = time.time()
        try:
            t_since = parse_time_bound(since, now)
            t_until = parse_time_bound(until, now) if until is not None else now
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--since/--until") from None
        try:
            cfgs = [load_config(p) for p in (config, against) if p is not None]
        except ConfigError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from None
        url = database_url
        target = ledger_target(home, url)
        from tokenplane.cli.progress import Progress

        t0 = time.perf_counter()
        with Progress("replay: reading the ledger"):
            workload = asyncio.run(_read_workload(target, t_since, t_until, tenant))
        read_s = time.perf_counter() - t0
        typer.echo(f"{len(workload)} requests from the ledger in {read_s:.1f} s", err=True)
        if export is not None:
            block = cfgs[0].routing.block_size if cfgs else 16
            with open(export, "wb") as fh:
                fh.writelines(mooncake_lines(workload, block))
            typer.echo(f"wrote {export}")
        if config is None:
            return
        try:
            meta = url or env_database_url()
            # PostgreSQL metadata lives in the database; SQLite's beside the ledger
            base = db_limits(Path(home or ".") if meta else
                             data_dir(home, need="ledger.db", explicit_ok=True), meta)
            proposed_table = limit_table(base, load_limit_changes(limits) if limits else [])
            current_table = limit_table(base, load_limit_changes(against_limits)
                                        if against_limits else [])
            proposed = replay_setup("proposed", cfgs[0], proposed_table, replicas=replicas,
                                    engine_profile=profile, seed=seed)
            current = (replay_setup("current", cfgs[1], current_table, replicas=replicas,
                                    engine_profile=profile, seed=seed)
                       if against is not None else None)
        except (LimitError, OSError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        rec = recorded(workload, proposed.slos)
        both = "both configs side by side" if current is not None else "the proposed config"
        with Progress(f"replay: {len(workload)} requests through {both} in virtual time"):
            cur, prop = _run_both(workload, current, proposed)
        rows = diff_rows(cur or rec, prop, rec)
        names = ("current" if cur is not None else "recorded", "proposed")
        table = format_diff(rows, names)
        typer.echo(table)
        result: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "window": {"since": t_since, "until": t_until}, "tenant": tenant,
            "requests": len(workload), "recorded": rec, "current": cur, "proposed": prop,
            "diff": [dict(zip(("what", "recorded", names[0], names[1]), r, strict=True))
                     for r in rows],
            "wall_s": round(time.perf_counter() - t0, 3),
        }
        assert out is not None
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        (d / "replay.json").write_text(json.dumps(_clean(result), indent=2))
        (d / "diff.txt").write_text(table + "\n")
        typer.echo(f"wrote {d}/replay.json")


async def _read_workload(target: str, since: float, until: float,
                         tenant: str | None) -> list[Any]:
    from tokenplane.metering.request_history import last_attempts
    from tokenplane.metering.stores.open import open_sink
    from tokenplane.sim.replay_workload import workload_from_events

    sink = await open_sink(target)
    try:
        events = await last_attempts(sink, since, until)
    finally:
        await sink.close()
    return workload_from_events(events, tenant)


def _run_both(workload: list[Any], current: Any, proposed: Any) -> tuple[Any, Any]:
    """Both replays; side by side in two processes when there are two and the platform
    forks (the child inherits the workload: nothing to serialise but its result), else
    one after the other."""
    import multiprocessing

    from tokenplane.sim.replay import run_replay

    if current is None:
        return None, run_replay(workload, proposed)
    if "fork" not in multiprocessing.get_all_start_methods():
        return run_replay(workload, current), run_replay(workload, proposed)
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        try:
            send.send((True, run_replay(workload, current)))
        except Exception as exc:  # handed to the parent, which raises it
            send.send((False, repr(exc)))
        finally:
            send.close()

    proc = ctx.Process(target=child, daemon=True)
    proc.start()
    send.close()
    try:
        prop = run_replay(workload, proposed)
        ok, cur = receive.recv()
    finally:
        proc.join()
        receive.close()
    if not ok:
        raise RuntimeError(f"replay of the current config failed: {cur}")
    return cur, prop


def _clean(x: Any) -> Any:
    from tokenplane.sim.runner import clean_json

    return clean_json(x)
