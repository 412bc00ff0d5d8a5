"""tokenplane's command line (typer). ``main`` is the console entry point."""

from tokenplane.cli.main import main

__all__ = ["main"]
