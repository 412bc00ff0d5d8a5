"""``tokenplane backup`` and ``tokenplane restore``: the single box's data directory.

A backup holds consistent copies of the SQLite databases (``ledger.db``: usage;
``meta.db``: tenants, keys, limits), taken with SQLite's online backup API so the
gateway may keep serving, plus the audit logs, the saved advice, and the secrets the
directory holds (``audit.key`` when the key lives there, ``console.secret``): keep
the backup as safe as the directory. Usage still in the journal when the backup is
taken (at most the flush interval's worth on a running gateway) is not in it. With
PostgreSQL (``database_url``), back up the database with ``pg_dump`` instead
(docs/OPERATIONS.md, "Backup and restore"); this command refuses.

``restore`` puts a backup into an empty data directory (or over one with
``--force``), never into one a gateway holds (its ``serve.lock``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Annotated

import typer

from tokenplane.cli.common import ConfigOpt, HomeOpt, data_dir, meta_url
from tokenplane.cli.startup_checks import DataDirLock, StartupError
from tokenplane.meta.pg_meta import is_postgres_url

DATABASES = ("ledger.db", "meta.db")
TREES = ("audit", "advice")
FILES = ("audit.key", "console.secret")
MANIFEST = "tokenplane-backup.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _copy_db(src: Path, dst: Path) -> None:
    source = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        target = sqlite3.connect(dst)
        try:
            source.backup(target)
        finally:
            target.close()
    finally:
        source.close()


def backup_dir(home: Path, out: Path) -> dict[str, str]:
    """Copy ``home``'s data into ``out`` (created, must be new or empty); the
    manifest's files and their SHA-256."""
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    for name in DATABASES:
        if (home / name).exists():
            _copy_db(home / name, out / name)
    for name in TREES:
        if (home / name).is_dir():
            shutil.copytree(home / name, out / name)
    for name in FILES:
        if (home / name).exists():
            shutil.copy2(home / name, out / name)
    files = {str(p.relative_to(out)): _sha256(p) for p in sorted(out.rglob("*")) if p.is_file()}
    (out / MANIFEST).write_text(json.dumps({"created_at": time.time(), "from": str(home),
                                            "files": files}, indent=1))
    return files


def restore_dir(src: Path, home: Path, force: bool) -> int:
    """Put the backup ``src`` into ``home``; how many files. Checks every file
    against the manifest first."""
    try:
        manifest = json.loads((src / MANIFEST).read_text())
    except (OSError, ValueError):
        raise ValueError(f"{src} is not a tokenplane backup (no readable {MANIFEST})") from None
    files: dict[str, str] = manifest["files"]
    for name, digest in files.items():
        if not (src / name).is_file() or _sha256(src / name) != digest:
            raise ValueError(f"{src / name} is missing or changed since the backup")
    present = [n for n in (*DATABASES, *TREES, *FILES) if (home / n).exists()]
    if present and not force:
        raise ValueError(f"{home} already holds {', '.join(present)}: restore into an empty "
                         "data directory, or give --force to replace them")
    hold = DataDirLock(home)
    try:
        hold.acquire()  # no gateway may be using it meanwhile
    except StartupError as exc:
        raise ValueError(str(exc)) from None
    try:
        for name in present:
            target = home / name
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink()
            for suffix in ("-wal", "-shm"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)
        for name in files:
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / name, home / name)
    finally:
        hold.release()
    return len(files)


def register(app: typer.Typer) -> None:
    @app.command()
    def backup(
        out: Annotated[Path, typer.Option(help="A new (or empty) directory for the backup.")],
        home: HomeOpt = None, config: ConfigOpt = None,
    ) -> None:
        """Back up a single box's data directory (SQLite ledger and metadata, audit
        logs, secrets), consistent while the gateway serves."""
        if is_postgres_url(meta_url(config)):
            typer.echo("the metadata and ledger are in PostgreSQL: back them up with "
                       "pg_dump (docs/OPERATIONS.md, 'Backup and restore')", err=True)
            raise typer.Exit(2)
        where = data_dir(home, config, need="ledger.db")
        try:
            files = backup_dir(where, out)
        except (ValueError, OSError, sqlite3.Error) as exc:
            typer.echo(f"backup: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"backed up {where} to {out} ({len(files)} files)")

    @app.command()
    def restore(
        from_: Annotated[Path, typer.Option("--from", help="The backup's directory.")],
        home: Annotated[Path, typer.Option(help="The data directory to restore into.")],
        force: Annotated[bool, typer.Option(help="Replace what the directory holds.")] = False,
    ) -> None:
        """Restore a backup into a data directory no gateway is using."""
        try:
            count = restore_dir(from_, home, force)
        except (ValueError, OSError) as exc:
            typer.echo(f"restore: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"restored {count} files into {home}")
