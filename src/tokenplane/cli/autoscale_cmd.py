"""``tokenplane autoscale status``: each autoscaled pool's replicas by phase, the last
decision (desired serving and warm replicas, its reasons) and the recent decisions.

    tokenplane autoscale status [--config gateway.yaml | --home DIR] [--format table|json]
    tokenplane autoscale status --url http://127.0.0.1:8080 [--key-env TOKENPLANE_ADMIN_KEY]

With ``--url`` it asks the running gateway (``GET /admin/v1/autoscale``, with the
admin key in the environment variable ``--key-env`` names); else it reads the data
directory the gateway writes: ``autoscale/status.json`` (the pools as of the last
round) and ``autoscale/decisions.jsonl`` (every decision that changed a pool).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from tokenplane.autoscale.gateway.decision_log import log_dir, read_decisions
from tokenplane.autoscale.gateway.status_file import read_status
from tokenplane.cli.common import ConfigOpt, HomeOpt, data_dir
from tokenplane.cli.tables import table


def _iso(t: object) -> str:
    if not isinstance(t, int | float):
        return "-"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_gateway(url: str, key: str, pool: str | None, limit: int) -> dict[str, Any]:
    query = {"limit": str(limit), **({"pool": pool} if pool else {})}
    req = urllib.request.Request(
        url.rstrip("/") + "/admin/v1/autoscale?" + urllib.parse.urlencode(query),
        headers={"authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            body: Any = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        typer.echo(f"{url}: HTTP {exc.code}: {detail}", err=True)
        raise typer.Exit(1) from None
    except (urllib.error.URLError, OSError) as exc:
        typer.echo(f"{url}: {exc}", err=True)
        raise typer.Exit(1) from None
    assert isinstance(body, dict)
    return body


def from_data_dir(home: Path, pool: str | None, limit: int) -> dict[str, Any]:
    status = read_status(home) or {"enabled": False, "pools": []}
    pools = [p for p in status.get("pools", []) if pool is None or p.get("pool") == pool]
    return {**status, "pools": pools, "decisions": read_decisions(home, pool, limit)}


def pool_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for p in body.get("pools", []):
        r = p.get("replicas") or {}
        rows.append({
            "pool": p.get("pool"), "policy": p.get("policy"), "actuator": p.get("actuator"),
            "serving": r.get("serving", 0), "starting": r.get("starting", 0),
            "warm": r.get("warm", 0), "draining": r.get("draining", 0),
            "desired": p.get("desired_serving"), "desired_warm": p.get("desired_warm"),
            "reasons": ",".join(p.get("reasons") or []) or "-",
        })
    return rows


def decision_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [{
        "at": _iso(d.get("at")), "pool": d.get("pool"),
        "serving": f"{d.get('serving_from')}->{d.get('serving_to')}",
        "warm": f"{d.get('warm_from')}->{d.get('warm_to')}",
        "direction": d.get("direction"), "reasons": ",".join(d.get("reasons") or []) or "-",
    } for d in body.get("decisions", [])]


def register(app: typer.Typer) -> None:
    auto = typer.Typer(help="Token-based autoscaling of the model pools.",
                       no_args_is_help=True)
    app.add_typer(auto, name="autoscale")

    @auto.command("status")
    def status(
        config: ConfigOpt = None,
        home: HomeOpt = None,
        url: Annotated[str | None, typer.Option(
            help="Ask this running gateway (its base URL) instead of the data directory.")
        ] = None,
        key_env: Annotated[str, typer.Option(
            help="Environment variable holding an admin key (with --url).")
        ] = "TOKENPLANE_ADMIN_KEY",
        pool: Annotated[str | None, typer.Option(help="Only this pool (model alias).")] = None,
        limit: Annotated[int, typer.Option(help="Recent decisions to show.", min=1,
                                           max=10_000)] = 20,
        fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    ) -> None:
        """Replicas by phase, desired serving and warm replicas, the deciding reasons,
        and the recent decisions (from -> to) of each autoscaled pool."""
        if fmt not in ("table", "json"):
            raise typer.BadParameter("use table or json", param_hint="--format")
        if url is not None:
            key = os.environ.get(key_env)
            if not key:
                raise typer.BadParameter(f"set ${key_env} to an admin key",
                                         param_hint="--key-env")
            body = from_gateway(url, key, pool, limit)
        else:
            d = data_dir(home, config, need="autoscale", explicit_ok=True)
            if not log_dir(d).exists():
                typer.echo(f"no autoscaler data in {d.resolve()} (autoscale: is off, or the "
                           "gateway has not run a round yet)", err=True)
                raise typer.Exit(1)
            body = from_data_dir(d, pool, limit)
        if fmt == "json":
            typer.echo(json.dumps(body, indent=2))
            return
        at = body.get("written_at")
        if at is not None:
            typer.echo(f"as of {_iso(at)} ({time.time() - float(at):.0f}s ago)")
        typer.echo(table(pool_rows(body)), nl=False)
        typer.echo("\nrecent decisions:")
        typer.echo(table(decision_rows(body)), nl=False)
