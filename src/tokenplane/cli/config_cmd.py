"""``tokenplane config check FILE``: validate a config, every error with its path."""

from __future__ import annotations

from typing import Annotated

import typer

from tokenplane.compose.config_file import ConfigError, load_config


def register(app: typer.Typer) -> None:
    cfg = typer.Typer(help="Configuration tools.", no_args_is_help=True)
    app.add_typer(cfg, name="config")

    @cfg.command("check")
    def check(file: Annotated[str, typer.Argument(help="The YAML config to validate.")]) -> None:
        """Validate FILE; print each error as 'path: message' and exit 1 if any."""
        try:
            c = load_config(file)
        except ConfigError as exc:
            for line in exc.errors:
                typer.echo(line)
            typer.echo(f"{len(exc.errors)} error(s) in {file}", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"{file}: ok ({len(c.models)} model alias(es), {len(c.tenants)} tenant(s))")
