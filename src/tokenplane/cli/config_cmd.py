"""``tokenplane config check FILE``: validate a config, every error with its path."""

from __future__ import annotations

from typing import Annotated, NoReturn

import typer

from tokenplane.compose.config_file import ConfigError, load_config
from tokenplane.compose.preflight import preflight


def register(app: typer.Typer) -> None:
    cfg = typer.Typer(help="Configuration tools.", no_args_is_help=True)
    app.add_typer(cfg, name="config")

    @cfg.command("check")
    def check(file: Annotated[str, typer.Argument(help="The YAML config to validate.")]) -> None:
        """Validate FILE and build every part ``serve`` would build from it (tokenizers,
        chat templates, engine profiles, prices, routing, SLO classes, guard policies;
        no port, store or upstream is touched). Print each error as 'path: message' and
        exit 1 if any; warnings (to stderr) do not fail the check."""
        try:
            c = load_config(file)
        except ConfigError as exc:
            _fail(file, exc.errors)
        found = preflight(c)
        for line in found.warnings:
            typer.echo(f"warning: {line}", err=True)
        if found.errors:
            _fail(file, found.errors)
        typer.echo(f"{file}: ok ({len(c.models)} model alias(es), {len(c.tenants)} tenant(s))")


def _fail(file: str, errors: list[str]) -> NoReturn:
    for line in errors:
        typer.echo(line)
    typer.echo(f"{len(errors)} error(s) in {file}", err=True)
    raise typer.Exit(1)
