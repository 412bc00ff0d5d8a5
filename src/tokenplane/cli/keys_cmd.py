"""``tokenplane keys``: create, list, rotate and revoke API keys (stored hashed).

These verbs act on the metadata database directly, with the authority of whoever can
open it (the operator); the roles of auth/roles.py bound what a *key* may do over the
admin API, which is how a tenant-admin or viewer manages keys."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tokenplane.auth.key_expiry import parse_duration
from tokenplane.auth.roles import check_role, role_of
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
        admin: Annotated[bool, typer.Option(help="Grant the admin scope (the role "
                                            "operator).")] = False,
        role: Annotated[str | None, typer.Option(
            help="operator, tenant-admin, viewer, auditor or inference (default: none: "
                 "inference and the tenant's own self-service reads).")] = None,
        expires: Annotated[str | None, typer.Option(
            help="Lifetime: 90d, 12h, 30m, 2w (default: no expiry).")] = None,
        home: Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")] = None,
        config: ConfigOpt = None,
    ) -> None:
        """Create a key; the key itself is printed alone on the last line, once."""
        problem = check_role(role)
        if problem is not None:
            raise typer.BadParameter(problem, param_hint="--role")
        expires_at = None
        if expires is not None:
            try:
                expires_at = time.time() + parse_duration(expires)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--expires") from None
        store = open_keys(store_home(home, config, explicit_ok=True), config)
        try:
            key, rec = store.create_key(tenant, department, app_, name, admin, role, expires_at)
        finally:
            store.close()
        until = f"; expires {_ts(rec.expires_at)} UTC" if rec.expires_at else ""
        typer.echo(f"created {rec.id} for tenant={tenant} department={department or '-'} "
                   f"app={app_ or '-'} role={rec.role or '-'}{until}; store the key now, it "
                   "is not shown again:")
        typer.echo(key)

    @keys.command("rotate")
    def rotate(
        key_id: Annotated[str, typer.Argument(help="The key's id (key_...).")],
        overlap: Annotated[str, typer.Option(
            help="How long the old key keeps working (the clients' switch-over).")] = "1d",
        home: Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")] = None,
        config: ConfigOpt = None,
    ) -> None:
        """A new key with the same tenant, department, app, name, role and lifetime;
        the old one expires after --overlap. The new key is printed on the last line."""
        try:
            overlap_s = parse_duration(overlap)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--overlap") from None
        store = open_keys(store_home(home, config), config)
        try:
            done = store.rotate(key_id, overlap_s)
        finally:
            store.close()
        if done is None:
            typer.echo(f"no live key {key_id}", err=True)
            raise typer.Exit(1)
        key, rec = done
        typer.echo(f"rotated {key_id} -> {rec.id}; {key_id} stops working at "
                   f"{_ts(time.time() + overlap_s)} UTC; store the new key now:")
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
        # within 100 columns the key's id, tenant, role and times; --wide: every column
        cols = (("id", "prefix", "tenant", "department", "app", "name", "role", "created",
                 "expires", "last used", "revoked") if wide else
                ("id", "tenant", "app", "role", "expires", "last used", "revoked"))
        table = Table(*cols)
        table.columns[0].no_wrap = True
        for r in recs:
            row = {"id": r.id, "prefix": r.prefix + "…", "tenant": r.tenant,
                   "department": r.department or "", "app": r.app or "", "name": r.name or "",
                   "role": role_of(r.admin, r.role) or "-", "created": _ts(r.created_at),
                   "expires": _ts(r.expires_at), "last used": _ts(r.last_used_at),
                   "revoked": _ts(r.revoked_at)}
            table.add_row(*(row[c] for c in cols))
        Console(width=10_000 if wide else WIDTH).print(table)
        if not wide:
            typer.echo("(also prefix, department, name and created: --wide)")

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
