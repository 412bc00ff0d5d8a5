"""``tokenplane limits``: set, show and delete budgets and rate limits.

Limits live in the data directory's ``meta.db`` (in PostgreSQL when
``$TOKENPLANE_DATABASE_URL`` is a ``postgresql://`` URL); running gateways pick a
change up within ``admission.limits_reload_s`` (1 s by default; 0.5 s with
PostgreSQL).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tokenplane.admission.limits import LimitError
from tokenplane.admission.money import money
from tokenplane.cli.common import open_keys, store_home
from tokenplane.cli.tables import WIDTH, Wide
from tokenplane.meta.limit_store import (
    LimitTarget,
    budget_micros,
    limits_to_dict,
)
from tokenplane.meta.limit_targets import MissingTarget, missing_target
from tokenplane.meta.open_stores import database_url, open_directory, open_limits

Home = Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")]
Tenant = Annotated[str, typer.Option(help="Tenant.")]
Dept = Annotated[str | None, typer.Option(help="Department (also qualifies --app).")]
App = Annotated[str | None, typer.Option("--app", help="App.")]
KeyId = Annotated[str | None, typer.Option("--key-id", help="API key id (key_...).")]
User = Annotated[str | None, typer.Option("--user", help="End user (the request's 'user').")]
Model = Annotated[str | None, typer.Option("--model", help="Only this model alias.")]
Count = Annotated[int | None, typer.Option(min=0)]


def _target(tenant: str, department: str | None, app: str | None, key_id: str | None,
            user: str | None, model: str | None) -> LimitTarget:
    return LimitTarget(tenant, department, app, key_id, user, model)


def register(app: typer.Typer) -> None:
    limits = typer.Typer(help="Budgets and rate limits per scope.", no_args_is_help=True)
    app.add_typer(limits, name="limits")

    @limits.command("set")
    def set_(
        tenant: Tenant,
        department: Dept = None,
        app_: App = None,
        key_id: KeyId = None,
        user: User = None,
        model: Model = None,
        rpm: Annotated[int | None, typer.Option(min=0, help="Requests per minute.")] = None,
        tpm: Annotated[int | None, typer.Option(min=0, help="Tokens per minute.")] = None,
        tpm_unit: Annotated[str | None, typer.Option(
            help="What --tpm counts: total_tokens (default), input_tokens, output_tokens."
        )] = None,
        tokens_per_day: Annotated[int | None, typer.Option(min=0)] = None,
        tokens_per_month: Annotated[int | None, typer.Option(min=0)] = None,
        budget: Annotated[str | None, typer.Option(
            help="Money budget per period, in the price table's currency (e.g. 250.00)."
        )] = None,
        period: Annotated[str | None, typer.Option(
            help="Budget period: daily, weekly, monthly (UTC calendar) or fixed."
        )] = None,
        resets_at: Annotated[list[str] | None, typer.Option(
            "--resets-at", help="With --period fixed: a reset date (ISO 8601, UTC unless "
            "it names a zone); repeat for several."
        )] = None,
        max_concurrent: Annotated[int | None, typer.Option(min=0)] = None,
        max_tokens_in_flight: Annotated[int | None, typer.Option(min=0)] = None,
        home: Home = None,
    ) -> None:
        """Set limits of one scope (merged with the ones it has)."""
        changes: dict[str, Any] = {
            k: v for k, v in (("rpm", rpm), ("tpm", tpm), ("tpm_unit", tpm_unit),
                              ("tokens_per_day", tokens_per_day),
                              ("tokens_per_month", tokens_per_month),
                              ("budget_period", period), ("max_concurrent", max_concurrent),
                              ("max_tokens_in_flight", max_tokens_in_flight))
            if v is not None
        }
        store = open_limits(store_home(home, explicit_ok=True), database_url())
        try:
            if budget is not None:
                changes["budget_micros"] = budget_micros(budget)
            if resets_at:
                changes["budget_resets_at"] = [_epoch(d) for d in resets_at]
            if not changes:
                typer.echo("nothing to set: give at least one limit (see --help)", err=True)
                raise typer.Exit(2)
            target = _target(tenant, department, app_, key_id, user, model)
            missing = _missing(store_home(home, explicit_ok=True), target)
            if missing is not None:
                typer.echo(f"{missing.message} Create it first (tokenplane keys create, or "
                           "the admin API); no limit was set.", err=True)
                raise typer.Exit(1)
            spec = store.set(target, changes)
        except LimitError as exc:
            typer.echo(f"invalid limit: {exc}", err=True)
            raise typer.Exit(2) from None
        finally:
            store.close()
        typer.echo(f"{target.scope().label}: {_describe(limits_to_dict(spec))}")

    @limits.command("show")
    def show(tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
             home: Home = None, wide: Wide = False) -> None:
        """List every scope's limits."""
        store = open_limits(store_home(home), database_url())
        try:
            entries = store.entries(tenant)
        finally:
            store.close()
        table = Table("tenant", "department", "app", "key", "user", "model", "limits",
                      "updated")
        for e in entries:
            t = e.target
            table.add_row(t.tenant, t.department or "", t.app or "", t.key_id or "",
                          t.user or "", t.model or "", _describe(limits_to_dict(e.limits)),
                          time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.updated_at)))
        Console(width=10_000 if wide else WIDTH).print(table)

    @limits.command("delete")
    def delete(tenant: Tenant, department: Dept = None, app_: App = None,
               key_id: KeyId = None, user: User = None, model: Model = None,
               home: Home = None) -> None:
        """Remove every limit of one scope."""
        store = open_limits(store_home(home), database_url())
        target = _target(tenant, department, app_, key_id, user, model)
        try:
            ok = store.delete(target)
        finally:
            store.close()
        if not ok:
            typer.echo(f"no limits for {target.scope().label}", err=True)
            raise typer.Exit(1)
        typer.echo(f"deleted the limits of {target.scope().label}")


def _missing(home: Path, target: LimitTarget) -> MissingTarget | None:
    """The part of ``target`` not in the directory (the same check as the admin API)."""
    keys = open_keys(home)
    try:
        directory = open_directory(keys)
        try:
            return missing_target(target, directory, keys)
        finally:
            directory.close()
    finally:
        keys.close()


def _epoch(text: str) -> float:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise LimitError(f"--resets-at: not an ISO 8601 date: {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _describe(spec: dict[str, Any]) -> str:
    parts = []
    for name, value in spec.items():
        if name == "budget_micros":
            parts.append(f"budget={money(value)}")
        elif name == "budget_resets_at":
            parts.append("resets_at=" + ",".join(
                datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for t in value))
        else:
            parts.append(f"{name}={value}")
    return " ".join(parts) or "(none)"
