"""``tokenplane audit``: verify the chain and signatures, export, prune.

The signing key comes from ``$TOKENPLANE_AUDIT_KEY`` (or the variable ``--key-env``
names), else from ``<data_dir>/audit.key`` (written by the gateway on first start).
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Annotated

import typer

from tokenplane.cli.common import data_dir
from tokenplane.governance.audit.chain import Keys
from tokenplane.governance.audit.keyfile import audit_key
from tokenplane.governance.audit.multi import export, log_dirs
from tokenplane.governance.audit.prune import DEFAULT_RETENTION_DAYS, prune_log
from tokenplane.governance.audit.verify import cli_verify
from tokenplane.metering.reports import parse_time_bound

HomeOpt = Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")]
DirOpt = Annotated[str | None, typer.Option(
    "--dir", help="One audit directory (default: every worker's under <home>/audit).")]
KeyEnvOpt = Annotated[str, typer.Option(help="Environment variable holding the signing key.")]


def _key(home: Path, key_env: str) -> bytes:
    found = audit_key(home, key_env, create=False)
    if found is None:
        typer.echo(f"no audit key: set ${key_env} or provide {home / 'audit.key'}", err=True)
        raise typer.Exit(2)
    return found[0]


def _dirs(home: Path, one: str | None) -> list[Path]:
    dirs = [Path(one)] if one else log_dirs(home / "audit")
    if not dirs:
        typer.echo(f"no audit log under {home / 'audit'}", err=True)
        raise typer.Exit(2)
    return dirs


def _bound(text: str | None, now: float) -> float | None:
    if not text:
        return None
    try:
        return parse_time_bound(text, now)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def register(app: typer.Typer) -> None:
    audit = typer.Typer(help="Verify, export and prune the audit log.", no_args_is_help=True)
    app.add_typer(audit, name="audit")

    @audit.command("verify")
    def verify(home: HomeOpt = None, dir_: DirOpt = None,
               key_env: KeyEnvOpt = "TOKENPLANE_AUDIT_KEY") -> None:
        """Check hash chains, checkpoints and signed heads. Exit 0 when intact, 1 naming
        the first bad record, 2 when a log (or its key) cannot be used."""
        root = data_dir(home, need="audit" if dir_ is None else "")
        key = _key(root, key_env)
        worst = 0
        for d in _dirs(root, dir_):
            out = io.StringIO()
            rc = cli_verify(d, key, out)
            typer.echo(f"{d}: {out.getvalue().strip()}")
            if rc and not worst:
                worst = rc
        raise typer.Exit(worst)

    @audit.command("export")
    def export_(
        out: Annotated[str, typer.Option(help="JSONL file to write.")],
        tenant: Annotated[str | None, typer.Option(help="Only this tenant's requests.")] = None,
        since: Annotated[str | None, typer.Option(help="Epoch, ISO time or age (7d).")] = None,
        until: Annotated[str | None, typer.Option(help="Epoch, ISO time or age.")] = None,
        home: HomeOpt = None, dir_: DirOpt = None,
    ) -> None:
        """Write records (with their hashes) to one JSONL file for compliance."""
        root = data_dir(home, need="audit" if dir_ is None else "")
        now = time.time()
        dirs = _dirs(root, dir_)
        source = dirs[0] if dir_ else root / "audit"
        n = export(source, Path(out), tenant=tenant, since=_bound(since, now),
                   until=_bound(until, now))
        typer.echo(f"exported {n} records to {out}")

    @audit.command("prune")
    def prune(
        days: Annotated[float, typer.Option(help="Keep this many days.")] = DEFAULT_RETENTION_DAYS,
        home: HomeOpt = None, dir_: DirOpt = None,
        key_env: KeyEnvOpt = "TOKENPLANE_AUDIT_KEY",
    ) -> None:
        """Remove records older than ``days``, up to a signed checkpoint, keeping the
        chain verifiable. Run it with the gateway stopped (a running gateway prunes
        its own log daily per ``governance.audit.retention_days``)."""
        root = data_dir(home, need="audit" if dir_ is None else "")
        keys = Keys.derive(_key(root, key_env))
        cutoff = time.time() - days * 86400.0
        total = 0
        for d in _dirs(root, dir_):
            try:
                removed = prune_log(d, keys, cutoff)
            except ValueError as exc:
                typer.echo(f"{d}: {exc}", err=True)
                raise typer.Exit(2) from None
            typer.echo(f"{d}: removed {removed} records")
            total += removed
        typer.echo(f"pruned {total} records older than {days:g} days")
