"""``tokenplane advise``: the optimisation advisor's findings (docs/ADVICE.md).

    tokenplane advise [--since 30d] [--until ...] [--tenant T] [--format table|json]

Reads the ledger (as ``tokenplane usage`` finds it): its advice rollups, feedback and
newest price table. The same document as ``GET /admin/v1/advice``. Progress goes to
stderr (``cli/progress.py``), the findings to stdout.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import orjson
import typer

from tokenplane.advice.coverage import explain
from tokenplane.advice.gateway.source import gather_advice
from tokenplane.cli.common import ConfigOpt, config_value
from tokenplane.cli.usage_cmd import (
    DbUrl,
    Home,
    Tenant,
    Until,
    _bound,
    audit_dir,
    ledger_target,
)
from tokenplane.metering.stores.open import open_sink

ADVISE_FORMATS = ("table", "json")
Since = Annotated[str, typer.Option(help="Start: epoch, ISO date/time (UTC) or an age like "
                                    "7d / 30d (default 30d).")]


def render_table(doc: dict[str, Any]) -> str:
    """The findings as numbered blocks: what, saving, evidence, what to do."""
    lines = [f"advice for {doc['tenant'] or 'all tenants'} over {doc['window_days']} days: "
             f"{doc['total']['findings']} findings, saving "
             f"{doc['total']['tokens_per_month']:,} tokens and "
             f"{doc['total']['cost_per_month']} {doc['currency']} per month"]
    for i, f in enumerate(doc["findings"], 1):
        s = f["saving"]
        figures = ", ".join(f"{k}={v}" for k, v in f["evidence"]["figures"].items())
        lines += [
            "",
            f"{i}. [{f['kind']}] {f['tenant']}/{f['app']} on {f['model']}: {f['title']}",
            f"   saves {s['tokens_per_month']:,} tokens and {s['cost_per_month']} "
            f"{s['currency']} per month",
            f"   evidence: {f['evidence']['query']}",
            f"             {figures}",
            f"   do: {f['action']}",
        ]
    for kind, why in doc["not_evaluated"].items():
        lines.append(f"\nnot evaluated: {kind}: {why}")
    cov = doc.get("coverage")
    if cov:
        lines += ["", *explain(cov)]
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    @app.command("advise")
    def advise(
        since: Since = "30d", until: Until = None, tenant: Tenant = None,
        fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
        home: Home = None, database_url: DbUrl = None, config: ConfigOpt = None,
    ) -> None:
        """Findings that save tokens: template waste, cacheable prefixes, verbose
        outputs, version efficiency, right-sizing, RAG context, history, tool output."""
        if fmt not in ADVISE_FORMATS:
            raise typer.BadParameter("use table or json", param_hint="--format")
        now = time.time()
        lo, hi = _bound(since, "--since", now), _bound(until, "--until", now)
        if lo is not None and hi is not None and lo >= hi:
            raise typer.BadParameter("must be before --until", param_hint="--since")
        target = ledger_target(home, database_url, config)
        # the MCP tools' findings read the audit log, as the gateway does with mcp: set
        audit = audit_dir(home, config) if config_value(config, "mcp") else None

        from tokenplane.cli.progress import Progress

        async def go(bar: Progress) -> dict[str, Any]:
            sink = await open_sink(target)
            try:
                return await gather_advice(sink, since=lo, until=hi, tenant=tenant, now=now,
                                           progress=lambda step: bar.step(step, 0),
                                           audit=audit)
            finally:
                await sink.close()

        with Progress("advise") as bar:
            doc = asyncio.run(go(bar))
        if fmt == "json":
            typer.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        else:
            typer.echo(render_table(doc), nl=False)
