"""Helpers shared by the verbs: the data directory (found as ``serve`` finds it) and stores."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.open_stores import database_url, open_key_store

DEFAULT_HOME = ".tokenplane"
HomeOpt = Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")]
ConfigOpt = Annotated[str | None, typer.Option(
    "--config", help="The gateway's YAML config: its data_dir and database_url are used.")]


def config_value(config: str | None, name: str) -> str | None:
    if config is None:
        return None
    try:
        data: Any = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        typer.echo(f"cannot read --config {config}: {exc}", err=True)
        raise typer.Exit(2) from None
    value = data.get(name) if isinstance(data, dict) else None
    return str(value) if value else None


def data_dir(explicit: str | None = None, config: str | None = None, *,
             need: str = "meta.db", explicit_ok: bool = False) -> Path:
    """The data directory ``serve`` would use: ``--home``, else ``--config``'s
    ``data_dir``, else ``$TOKENPLANE_HOME``, else ``./.tokenplane``.

    A command never conjures an empty one from the default: the directory must hold
    ``need``, unless ``explicit_ok`` (a command that writes there, or reports itself
    what is missing) and it was named explicitly; if not, the error says where it
    looked and how to point the command at the gateway's data."""
    looked: list[str] = []
    chosen: str | None = None
    for source, value in (("--home", explicit),
                          ("--config data_dir", config_value(config, "data_dir")),
                          ("$TOKENPLANE_HOME", os.environ.get("TOKENPLANE_HOME") or None)):
        if value is not None and chosen is None:
            chosen = value
            looked.append(f"{source} ({value})")
    home = Path(chosen or DEFAULT_HOME)
    if chosen is None:
        looked.append(f"the default {DEFAULT_HOME} in {Path.cwd()}")
    if (home / need).exists() or (explicit_ok and chosen is not None):
        return home
    typer.echo(f"no tokenplane data at {home.resolve()} ({need} missing); looked at "
               f"{', '.join(looked)}. Point the command at the gateway's data with --home, "
               "--config or $TOKENPLANE_HOME (or run it where `tokenplane serve` runs)."
               + " Nothing was created.", err=True)
    raise typer.Exit(1)


def meta_url(config: str | None = None) -> str | None:
    """The metadata database: $TOKENPLANE_DATABASE_URL, else ``--config``'s
    ``database_url`` (None: SQLite in the data directory)."""
    return database_url() or config_value(config, "database_url")


def open_keys(home: Path, config: str | None = None) -> KeyStore:
    """PostgreSQL when the database URL is one, else ``<home>/meta.db``."""
    return open_key_store(home, meta_url(config))


def store_home(home: str | None, config: str | None = None, explicit_ok: bool = False) -> Path:
    """The data directory of the key and limit stores (:func:`data_dir`); not looked
    for with PostgreSQL metadata, which does not live there."""
    url = meta_url(config)
    if url is not None and url.startswith(("postgresql://", "postgres://")):
        return Path(home or DEFAULT_HOME)
    return data_dir(home, config, explicit_ok=explicit_ok)
