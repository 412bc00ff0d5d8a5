"""``tokenplane keys``: create, list and revoke API keys (stored hashed)."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tokenplane.cli.common import ConfigOpt, open_keys, store_home
from tokenplane.cli.tables import WIDTH, Wide


def register(app: typer.Typer) -> None:
    keys = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)
    app.add_typer(keys, name="keys")

    @keys.command("create")
    def create(
        tenant: Annotated[str, typer.Option(help="Tenant the key belongs to (created if new).")],
        department: Annotated[str | None, typer.Option(help="Department (created if new).")] = None,
        app_: Annotated[str | None, typer.Option("--app", help="App (created if new).")] = None,
        name: Annotated[str | None, typer.Option(help="A label for the key.")] = None,
        admin: Annotated[bool, typer.Option(help="Grant the admin scope.")] = False,
        home: Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")] = None,
        config: ConfigOpt = None,
    ) -> None:
        """Create a key; the key itself is printed alone on the last line, once."""
        store = open_keys(store_home(home, config, explicit_ok=True), config)
        try:
            key, rec = store.create_key(tenant, department, app_, name, admin)
        finally:
            store.close()
        typer.echo(f"created {rec.id} for tenant={tenant} department={department or '-'} "
                   f"app={app_ or '-'}; store the key now, it is not shown again:")
        typer.echo(key)

    @keys.command("list")
    def list_(
        tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
        home: Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")] = None,
        config: ConfigOpt = None,
        wide: Wide = False,
    ) -> None:
        """List keys (ids and prefixes only; keys are stored hashed)."""
        store = open_keys(store_home(home, config), config)
        try:
            recs = store.list_keys(tenant)
        finally:
            store.close()
        table = Table("id", "prefix", "tenant", "department", "app", "name", "admin", "created",
                      "revoked")
        for r in recs:
            table.add_row(r.id, r.prefix + "…", r.tenant, r.department or "", r.app or "",
                          r.name or "", "yes" if r.admin else "", _ts(r.created_at),
                          _ts(r.revoked_at) if r.revoked_at else "")
        Console(width=10_000 if wide else WIDTH).print(table)

    @keys.command("revoke")
    def revoke(
        key_id: Annotated[str, typer.Argument(help="The key's id (key_...).")],
        home: Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")] = None,
        config: ConfigOpt = None,
    ) -> None:
        """Revoke a key; a running gateway refuses it from its next request."""
        store = open_keys(store_home(home, config), config)
        try:
            ok = store.revoke(key_id)
        finally:
            store.close()
        if not ok:
            typer.echo(f"no active key {key_id}", err=True)
            raise typer.Exit(1)
        typer.echo(f"revoked {key_id}")


def _ts(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) if t else ""
