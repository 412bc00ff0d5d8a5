"""The ``tokenplane`` command: assembles the verb groups."""

from __future__ import annotations

import typer

from tokenplane.cli import config_cmd, keys_cmd, serve_cmd


def build_cli() -> typer.Typer:
    app = typer.Typer(
        help="tokenplane: a token-native gateway and control plane for LLM inference.",
        no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    )
    serve_cmd.register(app)
    keys_cmd.register(app)
    config_cmd.register(app)
    return app


def main() -> None:
    build_cli()()
