"""``tokenplane config check FILE``: validate a config, every error with its path."""

from __future__ import annotations

import re
from typing import Annotated, NoReturn

import typer

from tokenplane.compose.config_file import check_config
from tokenplane.compose.preflight import preflight


def register(app: typer.Typer) -> None:
    cfg = typer.Typer(help="Configuration tools.", no_args_is_help=True)
    app.add_typer(cfg, name="config")

    @cfg.command("check")
    def check(file: Annotated[str, typer.Argument(help="The YAML config to validate.")]) -> None:
        """Validate FILE and build every part ``serve`` would build from it (tokenizers,
        chat templates, engine profiles, prices, routing, SLO classes, guard policies;
        no port, store or upstream is touched). Print each error as 'path: message' and
        exit 1 if any (all of them in one run: the schema's, the cross-references', the
        environment's and the build's, grouped by where they are); warnings (to stderr)
        do not fail the check."""
        c, errors = check_config(file)
        if c is not None:
            found = preflight(c)
            for line in found.warnings:
                typer.echo(f"warning: {line}", err=True)
            errors = errors + found.errors
        if errors or c is None:
            _fail(file, errors)
        typer.echo(f"{file}: ok ({len(c.models)} model alias(es), {len(c.tenants)} tenant(s))")


def _section(line: str) -> str:
    """The top-level part of an error's path: ``models[1]``, ``routing``, ``(file)``."""
    path = line.split(": ", 1)[0]
    return re.split(r"(?<=\])[.\[]|\.", path, maxsplit=1)[0]


def _fail(file: str, errors: list[str]) -> NoReturn:
    """Every error, grouped by where it is in the file (a blank line between the
    groups, the file's order kept within each)."""
    groups: dict[str, list[str]] = {}
    for line in dict.fromkeys(errors):
        groups.setdefault(_section(line), []).append(line)
    typer.echo("\n\n".join("\n".join(lines) for lines in groups.values()))
    typer.echo(f"{len(errors)} error(s) in {file}", err=True)
    raise typer.Exit(1)
