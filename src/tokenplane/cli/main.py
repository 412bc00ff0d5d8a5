"""The ``tokenplane`` command: assembles the verb groups."""

from __future__ import annotations

import typer

from tokenplane.cli.advise_cmd import register as register_advise
from tokenplane.cli.audit_cmd import register as register_audit
from tokenplane.cli.autoscale_cmd import register as register_autoscale
from tokenplane.cli.backup_cmd import register as register_backup
from tokenplane.cli.config_cmd import register as register_config
from tokenplane.cli.keys_cmd import register as register_keys
from tokenplane.cli.limits_cmd import register as register_limits
from tokenplane.cli.plan_cmd import register as register_plan
from tokenplane.cli.replay_cmd import register as register_replay
from tokenplane.cli.report_cmd import register as register_report
from tokenplane.cli.serve_cmd import register as register_serve
from tokenplane.cli.simulate_cmd import register as register_simulate
from tokenplane.cli.slo_cmd import register as register_slo
from tokenplane.cli.tools_cmd import register as register_tools
from tokenplane.cli.usage_cmd import register as register_usage


def build_cli() -> typer.Typer:
    app = typer.Typer(
        help="tokenplane: a token-native gateway and control plane for LLM inference.",
        no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    )
    register_serve(app)
    register_keys(app)
    register_limits(app)
    register_config(app)
    register_simulate(app)
    register_usage(app)
    register_advise(app)
    register_audit(app)
    register_slo(app)
    register_tools(app)
    register_replay(app)
    register_plan(app)
    register_report(app)
    register_autoscale(app)
    register_backup(app)
    return app


def main() -> None:
    build_cli()()
