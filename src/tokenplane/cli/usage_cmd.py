"""``tokenplane usage``: reports from the ledger's rollups.

    tokenplane usage --by tenant --by app --since 7d [--until ...] [--format table|csv|json]
    tokenplane usage sources   # per tenant and app: tokens and shares by source
    tokenplane usage prompts   # repeated system prompts (fingerprints) and cacheable tokens
    tokenplane usage top --by app --order cost
    tokenplane usage clients --since 7d  # by API (OpenAI Chat, Anthropic Messages, ...) and client
    tokenplane usage sessions --order cost --limit 20   # the costliest agent sessions
    tokenplane usage session ID [--png waterfall.png]    # one session's steps (waterfall)

The ledger is ``$TOKENPLANE_DATABASE_URL`` (PostgreSQL) if set, else
``<data dir>/ledger.db`` (``--home`` or ``$TOKENPLANE_HOME``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from tokenplane.cli.common import DEFAULT_HOME, ConfigOpt, config_value, data_dir, meta_url
from tokenplane.cli.session_chart import write_waterfall
from tokenplane.cli.tables import Wide, table
from tokenplane.governance.audit.service import audit_root
from tokenplane.mcp.gateway.session_tools import session_tool_costs
from tokenplane.metering.client_reports import CLIENT_DIMENSIONS, client_report
from tokenplane.metering.report_views import add_cacheable_tokens
from tokenplane.metering.reports import (
    REPORT_DIMENSIONS,
    fingerprint_report,
    parse_time_bound,
    token_source_report,
    top_consumers,
    usage_report,
)
from tokenplane.metering.session_reports import (
    SESSION_ORDERS,
    costliest_sessions,
    session_report,
)
from tokenplane.metering.stores.base import LedgerSink
from tokenplane.metering.stores.open import is_postgres_url, open_sink

FORMATS = ("table", "csv", "json")
Home = Annotated[str | None, typer.Option(help="Data directory ($TOKENPLANE_HOME).")]
DbUrl = Annotated[str | None, typer.Option(
    "--database-url", help="Ledger database URL ($TOKENPLANE_DATABASE_URL).")]
Since = Annotated[str | None, typer.Option(help="Start: epoch, ISO date/time (UTC) or an age "
                                           "like 24h / 7d.")]
Until = Annotated[str | None, typer.Option(help="End (exclusive), same forms as --since.")]
Fmt = Annotated[str, typer.Option("--format", help="table, csv or json.")]
Tenant = Annotated[str | None, typer.Option(help="Only this tenant.")]


def audit_dir(home: str | None, config: str | None) -> Path | None:
    """The audit log of the data directory ``serve`` would use, if it has one (the MCP
    calls behind a session's steps)."""
    chosen = home or config_value(config, "data_dir") or os.environ.get("TOKENPLANE_HOME")
    root = audit_root(Path(chosen or DEFAULT_HOME))
    return root if root.is_dir() else None


def ledger_target(home: str | None, database_url: str | None,
                  config: str | None = None) -> str:
    """The ledger to read: an explicit URL, $TOKENPLANE_DATABASE_URL, ``--config``'s
    ``database_url``, else the SQLite file in the data directory, found as ``serve``
    finds it (which must exist: a report never creates a ledger)."""
    url = database_url or meta_url(config)
    if url:
        if not is_postgres_url(url):
            raise typer.BadParameter("only postgresql:// URLs are supported",
                                     param_hint="--database-url")
        return url
    return str(data_dir(home, config, need="ledger.db") / "ledger.db")


def _bound(text: str | None, name: str, now: float) -> float | None:
    if text is None:
        return None
    try:
        return parse_time_bound(text, now)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=name) from None


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise typer.BadParameter(f"use one of {', '.join(FORMATS)}", param_hint="--format")


def _dims(values: list[str] | None, default: str) -> list[str]:
    dims = [d.strip() for v in (values or [default]) for d in v.split(",") if d.strip()]
    unknown = [d for d in dims if d not in REPORT_DIMENSIONS]
    if unknown or not dims:
        raise typer.BadParameter(f"choose from {', '.join(REPORT_DIMENSIONS)}",
                                 param_hint="--by")
    return dims


# what a usage table shows first when it must fit: who, how much, what it cost, then
# what became of the requests that did not end ok
USAGE_FIRST = ("requests", "cost", "currency", "limited", "client_errors", "failures",
               "cancelled", "total_tokens", "input_tokens", "output_tokens")


def _run(target: str, fmt: str,
         report: Callable[[LedgerSink], Awaitable[list[dict[str, Any]]]], *,
         wide: bool = False, first: tuple[str, ...] = ()) -> None:
    async def go() -> list[dict[str, Any]]:
        sink = await open_sink(target)
        try:
            return await report(sink)
        finally:
            await sink.close()

    from tokenplane.cli.progress import Progress

    with Progress("usage") as bar:
        bar.step("reading the ledger's rollups", 0)
        rows = asyncio.run(go())
    text = table(rows, fmt, wide=wide, first=first)
    typer.echo(text, nl=not text.endswith("\n"))


def register(app: typer.Typer) -> None:
    usage = typer.Typer(help="Usage reports from the ledger (tokens by source, cost).")
    app.add_typer(usage, name="usage")

    @usage.callback(invoke_without_command=True)
    def report(
        ctx: typer.Context,
        by: Annotated[list[str] | None, typer.Option(
            help="Group by tenant, department, app, model, key, day (repeat or comma-"
                 "separate; default tenant).")] = None,
        since: Since = None, until: Until = None, fmt: Fmt = "table", tenant: Tenant = None,
        wide: Wide = False, home: Home = None, database_url: DbUrl = None,
        config: ConfigOpt = None,
    ) -> None:
        """Requests, tokens (by kind and source) and cost, grouped as asked."""
        if ctx.invoked_subcommand is not None:
            return
        _check_format(fmt)
        dims = _dims(by, "tenant")
        now = time.time()
        lo, hi = _bound(since, "--since", now), _bound(until, "--until", now)
        _run(ledger_target(home, database_url, config), fmt,
             lambda sink: usage_report(sink, dims, lo, hi, tenant), wide=wide,
             first=(*dims, *USAGE_FIRST))

    @usage.command("sources")
    def sources(
        since: Since = None, until: Until = None, fmt: Fmt = "table", tenant: Tenant = None,
        wide: Wide = False, home: Home = None, database_url: DbUrl = None,
        config: ConfigOpt = None,
    ) -> None:
        """Per tenant and app: how many tokens are system prompt, history, RAG context,
        tools, user input and output, with shares."""
        _check_format(fmt)
        now = time.time()
        lo, hi = _bound(since, "--since", now), _bound(until, "--until", now)
        _run(ledger_target(home, database_url, config), fmt,
             lambda sink: token_source_report(sink, lo, hi, tenant), wide=wide,
             first=("tenant", "app", "total_tokens"))

    @usage.command("prompts")
    def prompts(
        min_requests: Annotated[int, typer.Option(min=1, help="Seen at least this often.")] = 2,
        limit: Annotated[int, typer.Option(min=1, help="At most this many rows.")] = 50,
        fmt: Fmt = "table", tenant: Tenant = None, wide: Wide = False, home: Home = None,
        database_url: DbUrl = None, config: ConfigOpt = None,
    ) -> None:
        """Repeated system prompts (fingerprints): requests and cacheable tokens."""
        _check_format(fmt)

        async def rows(sink: LedgerSink) -> list[dict[str, Any]]:
            return add_cacheable_tokens(
                await fingerprint_report(sink, tenant, min_requests, limit))

        _run(ledger_target(home, database_url, config), fmt, rows, wide=wide,
             first=("tenant", "app", "requests", "system_tokens", "last_ts"))

    @usage.command("top")
    def top(
        by: Annotated[str, typer.Option(
            help="tenant, department, app, model or key.")] = "tenant",
        order: Annotated[str, typer.Option(help="cost or tokens.")] = "cost",
        limit: Annotated[int, typer.Option(min=1, help="At most this many rows.")] = 10,
        since: Since = None, until: Until = None, fmt: Fmt = "table", tenant: Tenant = None,
        wide: Wide = False, home: Home = None, database_url: DbUrl = None,
        config: ConfigOpt = None,
    ) -> None:
        """The biggest consumers along one dimension."""
        _check_format(fmt)
        if by not in REPORT_DIMENSIONS or by == "day":
            raise typer.BadParameter("choose tenant, department, app, model or key",
                                     param_hint="--by")
        if order not in ("cost", "tokens"):
            raise typer.BadParameter("use cost or tokens", param_hint="--order")
        now = time.time()
        lo, hi = _bound(since, "--since", now), _bound(until, "--until", now)
        _run(ledger_target(home, database_url, config), fmt,
             lambda sink: top_consumers(sink, by, lo, hi, tenant, limit, order), wide=wide,
             first=(by, *USAGE_FIRST))

    @usage.command("clients")
    def clients(
        by: Annotated[list[str] | None, typer.Option(
            help="Also split by tenant and/or app (repeat or comma-separate).")] = None,
        since: Since = None, until: Until = None, fmt: Fmt = "table", tenant: Tenant = None,
        home: Home = None, database_url: DbUrl = None, config: ConfigOpt = None,
    ) -> None:
        """Requests, tokens and cost by API (OpenAI Chat, Completions, Embeddings,
        Anthropic Messages) and client (the User-Agent's product: claude-cli,
        openai-python, ...), the most tokens first, with shares. Day rollups: the
        bounds count whole days (UTC)."""
        _check_format(fmt)
        dims = [d.strip() for v in (by or []) for d in v.split(",") if d.strip()]
        if any(d not in CLIENT_DIMENSIONS for d in dims):
            raise typer.BadParameter("choose from tenant, app", param_hint="--by")
        now = time.time()
        lo, hi = _bound(since, "--since", now), _bound(until, "--until", now)
        _run(ledger_target(home, database_url, config), fmt,
             lambda sink: client_report(sink, lo, hi, tenant, dims))

    @usage.command("sessions")
    def sessions(
        order: Annotated[str, typer.Option(
            help="cost, tokens, steps or recent.")] = "cost",
        limit: Annotated[int, typer.Option(min=1, help="At most this many rows.")] = 20,
        since: Since = None, until: Until = None, fmt: Fmt = "table", tenant: Tenant = None,
        wide: Wide = False, home: Home = None, database_url: DbUrl = None,
        config: ConfigOpt = None,
    ) -> None:
        """The costliest agent sessions (by cost, tokens or steps; or the most recent)
        whose last step falls in [since, until)."""
        _check_format(fmt)
        if order not in SESSION_ORDERS:
            raise typer.BadParameter(f"use one of {', '.join(SESSION_ORDERS)}",
                                     param_hint="--order")
        now = time.time()
        lo, hi = _bound(since, "--since", now), _bound(until, "--until", now)
        _run(ledger_target(home, database_url, config), fmt,
             lambda sink: costliest_sessions(sink, tenant, lo, hi, limit, order), wide=wide,
             first=("session_id", "tenant", "app", "steps", "cost", "currency",
                    "total_tokens", "last_ts"))

    @usage.command("session")
    def session(
        session_id: Annotated[str, typer.Argument(help="The session id.")],
        png: Annotated[Path | None, typer.Option(
            "--png", help="Also write the waterfall chart to this PNG file.")] = None,
        fmt: Fmt = "table", tenant: Tenant = None, wide: Wide = False, home: Home = None,
        database_url: DbUrl = None, config: ConfigOpt = None,
    ) -> None:
        """One agent session's waterfall: per step, prompt tokens by source, the
        tool-output tokens added since the previous step, output tokens, tool calls,
        latency and cost."""
        _check_format(fmt)
        target = ledger_target(home, database_url, config)

        audit = audit_dir(home, config)

        async def go() -> list[dict[str, Any]]:
            sink = await open_sink(target)
            try:
                found = await session_report(sink, session_id, tenant)
                if len(found) == 1 and audit is not None:  # as the admin API answers
                    found[0]["tool_costs"] = await session_tool_costs(
                        sink, audit, session_id, found[0]["tenant"])
                return found
            finally:
                await sink.close()

        found = asyncio.run(go())
        if not found:
            typer.echo(f"no session {session_id!r} in the ledger"
                       + (f" for tenant {tenant}" if tenant else ""), err=True)
            raise typer.Exit(1)
        if len(found) > 1:
            tenants = ", ".join(str(r["tenant"]) for r in found)
            typer.echo(f"session {session_id!r} exists in several tenants ({tenants}): "
                       "name one with --tenant", err=True)
            raise typer.Exit(2)
        report = found[0]
        if png is not None:
            write_waterfall(report, png)
        if fmt == "json":
            typer.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
            return
        total = {"step": "total", **{k: v for k, v in report["total"].items()
                                     if k not in ("steps", "total_tokens")}}
        text = table([*report["steps"], total], fmt, wide=wide,
                     first=("step", "input_tokens", "output_tokens", "tool_calls", "cost"))
        if fmt == "table":
            t = report["total"]
            text = (f"session {report['id']}  tenant {report['tenant']}  app {report['app']}  "
                    f"{t['steps']} steps  {t['total_tokens']} tokens  {t['cost']} "
                    f"{report['currency']}\n\n" + text)
        typer.echo(text, nl=not text.endswith("\n"))
