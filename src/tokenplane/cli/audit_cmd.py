"""``tokenplane audit``: verify the chain and signatures, export, prune.

The key: ``--public-key`` (verify only: the Ed25519 public key the gateway logs at
start), else the secret in ``--key-file``, else in ``$TOKENPLANE_AUDIT_KEY`` (or the
variable ``--key-env`` names), else in ``<data_dir>/audit.key``. A key that is (also)
in the data directory proves integrity only: verify says so and exits 3.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Annotated

import typer

from tokenplane.cli.common import data_dir
from tokenplane.governance.audit.keyfile import KEY_FILE, read_key_file, resolve_key
from tokenplane.governance.audit.multi import export, log_dirs
from tokenplane.governance.audit.prune import DEFAULT_RETENTION_DAYS, prune_log
from tokenplane.governance.audit.signing import Signer, Verifier
from tokenplane.governance.audit.verify import check_anchors, cli_verify, read_anchors
from tokenplane.metering.reports import parse_time_bound

HomeOpt = Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")]
DirOpt = Annotated[str | None, typer.Option(
    "--dir", help="One audit directory (default: every worker's under <home>/audit).")]
KeyEnvOpt = Annotated[str, typer.Option(help="Environment variable holding the signing key.")]
KeyFileOpt = Annotated[str | None, typer.Option(
    help="File holding the signing key (governance.audit.key_file).")]
AnchorsOpt = Annotated[str | None, typer.Option(
    help="File of anchors shipped off the host (the 'audit anchor' log lines): each must "
         "still be in the log with the same hash.")]
PublicKeyOpt = Annotated[str | None, typer.Option(
    help="The Ed25519 public key (64 hex digits) the gateway logs at start: verify "
         "without holding the secret.")]


SEVERITY = {0: 0, 3: 1, 2: 2, 1: 3}  # exit codes of verify, least to most serious


def _secret(home: Path, key_env: str, key_file: str | None) -> tuple[bytes, str | None]:
    """The secret, and why it proves integrity only (None when it is kept apart)."""
    try:
        found = resolve_key(home, key_env, key_file, create=False)
    except ValueError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    if found is None:
        typer.echo(f"no audit key: give --key-file or --public-key, set ${key_env}, or "
                   f"provide {home / KEY_FILE}", err=True)
        raise typer.Exit(2)
    key, source = found
    return key, (f"the signing key is in the data directory ({source.where})"
                 if source.in_data_dir else None)


def _verifier(home: Path, key_env: str, key_file: str | None,
              public_key: str | None) -> tuple[Verifier, str | None]:
    if public_key is not None:
        try:
            verifier = Verifier.from_public_hex(public_key)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--public-key") from None
        weak = None
    else:
        key, weak = _secret(home, key_env, key_file)
        verifier = Verifier.from_secret(key)
    if weak is None:
        try:
            copy = read_key_file(home)
        except ValueError:
            copy = None
        if copy is not None and Signer(copy).public_raw == verifier.public_raw:
            weak = f"a copy of the signing key is in the data directory ({home / KEY_FILE})"
    return verifier, weak


def keep_apart(home: Path) -> str:
    """What exit 3 means and the steps that make verify prove authenticity."""
    return (
        "exit 3: integrity only. The signing key is in the data directory, so anyone who "
        "could edit these logs could have re-signed them. To keep the key apart:\n"
        f"  1. move it out:  install -m 600 {home / KEY_FILE} /etc/tokenplane/audit.key "
        f"&& rm {home / KEY_FILE}\n"
        "  2. point the gateway at it: governance.audit.key_file: /etc/tokenplane/"
        "audit.key (or put the key in $TOKENPLANE_AUDIT_KEY), then restart it\n"
        "  3. verify with the key from there: tokenplane audit verify --key-file "
        "/etc/tokenplane/audit.key (or --public-key HEX, the key the gateway logs at "
        "start): exit 0 when intact\n"
        "The records written so far stay verifiable with the same key "
        "(docs/GOVERNANCE.md, 'Audit threat model').")


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
               key_env: KeyEnvOpt = "TOKENPLANE_AUDIT_KEY", key_file: KeyFileOpt = None,
               public_key: PublicKeyOpt = None, anchors: AnchorsOpt = None) -> None:
        """Check hash chains, checkpoints and signed heads. Exit 0 when intact, 1 naming
        the first bad record, 2 when a log (or its key) cannot be used, 3 when the log
        is consistent but its key is in the data directory (integrity only)."""
        root = data_dir(home, need="audit" if dir_ is None else "", explicit_ok=True)
        verifier, weak = _verifier(root, key_env, key_file, public_key)
        shipped = read_anchors(Path(anchors).read_text()) if anchors else []
        worst = 0
        dirs = _dirs(root, dir_)
        from tokenplane.cli.progress import Progress

        with Progress("audit verify", len(dirs)) as bar:
            for d in dirs:
                bar.step(f"verifying {d.name}", 0)
                out = io.StringIO()
                rc = cli_verify(d, verifier, out, integrity_only=weak)
                typer.echo(f"{d}: {out.getvalue().strip()}")
                problem = check_anchors(d, shipped) if rc in (0, 3) else None
                if problem is not None:
                    typer.echo(f"{d}: audit log FAILED the anchors: {problem}")
                    rc = 1
                worst = max(worst, rc, key=SEVERITY.__getitem__)
                bar.step(d.name)
        missing = sorted({a.log for a in shipped} - {d.name for d in dirs}) if not dir_ else []
        for name in missing:
            typer.echo(f"{root / 'audit' / name}: audit log FAILED the anchors: the log is "
                       "missing (anchors were shipped for it)")
            worst = 1
        if worst == 3:
            typer.echo(keep_apart(root), err=True)
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
        root = data_dir(home, need="audit" if dir_ is None else "", explicit_ok=True)
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
        key_env: KeyEnvOpt = "TOKENPLANE_AUDIT_KEY", key_file: KeyFileOpt = None,
    ) -> None:
        """Remove records older than ``days``, up to a signed checkpoint, keeping the
        chain verifiable. Run it with the gateway stopped (a running gateway prunes
        its own log daily per ``governance.audit.retention_days``)."""
        root = data_dir(home, need="audit" if dir_ is None else "", explicit_ok=True)
        key, _ = _secret(root, key_env, key_file)
        signer = Signer(key)
        verifier = signer.verifier(key)
        cutoff = time.time() - days * 86400.0
        total = 0
        for d in _dirs(root, dir_):
            try:
                removed = prune_log(d, signer, verifier, cutoff)
            except ValueError as exc:
                typer.echo(f"{d}: {exc}", err=True)
                raise typer.Exit(2) from None
            typer.echo(f"{d}: removed {removed} records")
            total += removed
        typer.echo(f"pruned {total} records older than {days:g} days")
