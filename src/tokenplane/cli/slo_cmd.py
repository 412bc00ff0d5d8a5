"""``tokenplane slo status``: each configured SLO's SLIs, error budget, burn rates and
firing alerts, computed from the ledger (the source of truth: a restart resets
nothing).

    tokenplane slo status --config gateway.yaml [--format table|json]
    tokenplane slo rules --config gateway.yaml [--out slo-rules.yaml]
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any

import typer
import yaml

from tokenplane.cli.tables import Wide, table
from tokenplane.cli.usage_cmd import DbUrl, Home, ledger_target
from tokenplane.compose.config_file import ConfigError, load_config
from tokenplane.config.schema import GatewayConfig
from tokenplane.metering.reports import parse_time_bound
from tokenplane.metering.request_history import last_attempts
from tokenplane.metering.stores.open import open_sink
from tokenplane.slo.evaluator import SliStatus, SloEvaluator
from tokenplane.slo.facts import facts_from_event
from tokenplane.slo.rules import rule_groups
from tokenplane.slo.spec import slo_from_config

ConfigOpt = Annotated[str | None, typer.Option("--config", help="Gateway config (YAML).")]


async def evaluate_from_ledger(
    target: str, evaluator: SloEvaluator, now: float
) -> list[SliStatus]:
    longest = max((s.window_s for s in evaluator.slos), default=0.0)
    sink = await open_sink(target)
    try:
        events = await last_attempts(sink, now - longest, now + 1e-6)
    finally:
        await sink.close()
    evaluator.observe_all(facts_from_event(e, e.slo_class or "") for e in events)
    return evaluator.status(now)


def config_with_slos(path: str | None) -> GatewayConfig:
    """The config at ``path``; exit 2 when it is invalid, 1 when it has no SLO."""
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    if not cfg.slos:
        typer.echo("no SLOs configured (slos: in the config; see examples/slos.yaml)",
                   err=True)
        raise typer.Exit(1)
    return cfg


def _row(s: SliStatus) -> dict[str, Any]:
    d = s.as_dict()
    burns = d.pop("burn_rates")
    alerts = d.pop("alerts")
    assert isinstance(burns, dict) and isinstance(alerts, list)
    d["burn_rates"] = " ".join(f"{w}={r:.2f}" for w, r in burns.items())
    d["alerts"] = ",".join(f"{a['severity']}({a['long_window']}/{a['short_window']})"
                           for a in alerts) or "-"
    d["sli_ratio"] = round(float(str(d["sli_ratio"])), 6)
    d["budget_remaining"] = round(float(str(d["budget_remaining"])), 6)
    d["bad_events_left"] = round(float(str(d["bad_events_left"])), 2)
    return d


def register(app: typer.Typer) -> None:
    slo = typer.Typer(help="Service-level objectives and their error budgets.",
                      no_args_is_help=True)
    app.add_typer(slo, name="slo")

    @slo.command("rules")
    def rules(
        config: ConfigOpt = None,
        out: Annotated[str | None, typer.Option(help="Write here instead of stdout.")] = None,
    ) -> None:
        """Prometheus recording and alerting rules for the configured SLOs (check them
        with `promtool check rules`)."""
        cfg = config_with_slos(config)
        text = yaml.safe_dump(rule_groups([slo_from_config(s) for s in cfg.slos]),
                              sort_keys=False, width=10_000)
        if out is None:
            typer.echo(text, nl=False)
        else:
            with open(out, "w", encoding="utf-8") as f:
                f.write(text)

    @slo.command("status")
    def status(
        config: ConfigOpt = None,
        home: Home = None,
        database_url: DbUrl = None,
        at: Annotated[str | None, typer.Option(
            help="Evaluate as of this time (epoch, ISO or an age like 1h); default now.")
        ] = None,
        fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
        wide: Wide = False,
    ) -> None:
        """SLI, objective, budget left (share and bad events), burn rates, alerts."""
        if fmt not in ("table", "json"):
            raise typer.BadParameter("use table or json", param_hint="--format")
        cfg = config_with_slos(config)
        now = time.time()
        if at is not None:
            try:
                now = parse_time_bound(at, now)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--at") from None
        target = ledger_target(home or cfg.data_dir, database_url or cfg.database_url)
        evaluator = SloEvaluator([slo_from_config(s) for s in cfg.slos])
        rows = asyncio.run(evaluate_from_ledger(target, evaluator, now))
        if fmt == "json":
            typer.echo(json.dumps([r.as_dict() for r in rows], indent=2))
        else:
            typer.echo(table([_row(r) for r in rows], "table", wide=wide,
                             first=("slo", "sli", "objective", "window_s", "sli_ratio",
                                    "budget_remaining", "alerts")))
