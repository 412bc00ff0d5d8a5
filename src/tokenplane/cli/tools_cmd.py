"""``tokenplane tools``: the MCP gateway's tools (docs/MCP.md).

    tokenplane tools check --config gateway.yaml --tenant T [--department D] [--app A]
                           [--key KEY_ID] [--arguments JSON] NAME...
    tokenplane tools list --url http://gateway:8080 --key tp-... [--server S]
    tokenplane tools usage [--home DIR | --config gateway.yaml] [--tenant T] [--since ...]

``check`` says what the config's rules decide for a caller (no server is asked);
``list`` asks a running gateway what a key sees; ``usage`` sums the audit log's MCP
records: calls, denials, latency and result tokens by tool and app.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Annotated, Any

import typer

from tokenplane.auth.principal import Principal
from tokenplane.cli.common import ConfigOpt, HomeOpt, data_dir
from tokenplane.compose.config_file import ConfigError, load_config
from tokenplane.governance.audit.multi import log_dirs
from tokenplane.governance.audit.segments import iter_records
from tokenplane.governance.audit.service import audit_root
from tokenplane.mcp.names import split
from tokenplane.mcp.policy import McpPolicy
from tokenplane.mcp.usage import tool_usage
from tokenplane.metering.reports import format_rows, parse_time_bound

Fmt = Annotated[str, typer.Option("--format", help="table or json")]


def _policy(config: str | None) -> McpPolicy:
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    if cfg.mcp is None:
        typer.echo("no mcp section in the config (see examples/mcp.yaml)", err=True)
        raise typer.Exit(1)
    return McpPolicy(cfg.mcp)


def check_rows(policy: McpPolicy, who: Principal, names: list[str],
               arguments: dict[str, Any]) -> list[dict[str, Any]]:
    perms = policy.for_principal(who)
    rows = []
    for name in names:
        parts = split(name)
        if parts is None:
            rows.append({"name": name, "decision": "invalid",
                         "reason": "not a server__name"})
            continue
        denial = policy.check_call(perms, parts[0], parts[1], arguments, False)
        reason = "" if denial is None else denial.reason
        if denial is not None and denial.hidden:  # what the agent is told hides why
            reason = "no rule allows it for this caller, or one denies it"
        rows.append({"name": name, "decision": "allow" if denial is None else denial.decision,
                     "reason": reason})
    return rows


def _rpc(url: str, key: str, body: dict[str, Any], sid: str | None) -> tuple[Any, str | None]:
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json",
               "accept": "application/json, text/event-stream"}
    if sid:
        headers["mcp-session-id"] = sid
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw, got = resp.read(), resp.headers.get("mcp-session-id")
    except urllib.error.HTTPError as exc:
        raw, got = exc.read(), None
    except OSError as exc:
        typer.echo(f"cannot reach {url}: {exc}", err=True)
        raise typer.Exit(1) from None
    answer = json.loads(raw) if raw else None
    if isinstance(answer, dict) and "error" in answer:
        typer.echo(f"{url}: {answer['error'].get('message')}", err=True)
        raise typer.Exit(1)
    return answer, got


def register(app: typer.Typer) -> None:
    tools = typer.Typer(help="The MCP gateway's tools: rules, what a key sees, usage.",
                        no_args_is_help=True)
    app.add_typer(tools, name="tools")

    @tools.command("check")
    def check(
        names: Annotated[list[str], typer.Argument(help="server__tool names to check")],
        tenant: Annotated[str, typer.Option(help="The caller's tenant.")],
        config: ConfigOpt = None,
        department: Annotated[str | None, typer.Option(help="Its department.")] = None,
        app_name: Annotated[str | None, typer.Option("--app", help="Its app.")] = None,
        key: Annotated[str | None, typer.Option(help="Its key id (key_...).")] = None,
        arguments: Annotated[str, typer.Option(help="A call's arguments (JSON object).")] = "{}",
        fmt: Fmt = "table",
    ) -> None:
        """What the rules decide for a caller and each NAME (exit 1 if any is refused)."""
        try:
            args = json.loads(arguments)
        except ValueError:
            args = None
        if not isinstance(args, dict):
            typer.echo("--arguments must be a JSON object", err=True)
            raise typer.Exit(2)
        who = Principal(key or "(any key)", tenant, department, app_name)
        rows = check_rows(_policy(config), who, names, args)
        typer.echo(json.dumps(rows, indent=2) if fmt == "json" else format_rows(rows))
        if any(r["decision"] != "allow" for r in rows):
            raise typer.Exit(1)

    @tools.command("list")
    def list_tools(
        url: Annotated[str, typer.Option(help="The gateway's base URL.")],
        key: Annotated[str, typer.Option(help="The API key to list for.",
                                         envvar="TOKENPLANE_API_KEY")],
        server: Annotated[str | None, typer.Option(help="Only this server's endpoint.")] = None,
        fmt: Fmt = "table",
    ) -> None:
        """The tools a key sees through a running gateway."""
        endpoint = url.rstrip("/") + "/mcp" + (f"/{server}" if server else "")
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "tokenplane-cli", "version": "1"}}}
        _, sid = _rpc(endpoint, key, init, None)
        answer, _ = _rpc(endpoint, key, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                         sid)
        found = answer["result"]["tools"] if isinstance(answer, dict) else []
        rows = [{"name": t.get("name"), "description": (t.get("description") or "")[:60]}
                for t in found]
        typer.echo(json.dumps(rows, indent=2) if fmt == "json" else format_rows(rows))

    @tools.command("usage")
    def usage(
        home: HomeOpt = None,
        config: ConfigOpt = None,
        tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
        since: Annotated[str | None, typer.Option(
            help="Start: an ISO time, or an age such as 24h or 7d.")] = None,
        by_app: Annotated[bool, typer.Option("--by-app/--all-apps")] = True,
        fmt: Fmt = "table",
    ) -> None:
        """Calls, denials, latency and result tokens by tool (and app), from the audit log."""
        root = audit_root(data_dir(home, config, need="audit"))
        try:
            start = parse_time_bound(since, time.time()) if since else None
        except ValueError as exc:
            typer.echo(f"--since: {exc}", err=True)
            raise typer.Exit(2) from None
        day = time.strftime("%Y%m%d", time.gmtime(start)) if start is not None else None
        records = (r for d in log_dirs(root) for r in iter_records(d, day)
                   if start is None or float(r.get("ts") or 0) >= start)
        rows = tool_usage(records, tenant=tenant, by_app=by_app)
        if fmt == "json":
            typer.echo(json.dumps(rows, indent=2))
        else:
            typer.echo(format_rows(rows) if rows else "no MCP calls in the audit log")
