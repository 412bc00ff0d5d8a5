"""``tokenplane report``: reports for finance and compliance, as HTML or PDF
(docs/REPORTS.md).

    tokenplane report cost --month 2026-11 [--tenant T] --format html|pdf --out FILE
    tokenplane report compliance --month 2026-11 [--tenant T] --format html|pdf --out FILE
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer

from tokenplane.cli.common import ConfigOpt, data_dir
from tokenplane.cli.usage_cmd import DbUrl, Home, ledger_target

MonthOpt = Annotated[str, typer.Option(help="The month, YYYY-MM (UTC).")]
TenantOpt = Annotated[str | None, typer.Option(help="Only this tenant.")]
FormatOpt = Annotated[str, typer.Option("--format", help="html or pdf.")]
OutOpt = Annotated[str, typer.Option(help="The file to write.")]
NoCharts = Annotated[bool, typer.Option("--no-charts", help="Leave the charts out.")]


def _month(text: str) -> Any:
    from tokenplane.reports.month import Month

    try:
        return Month.parse(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--month") from None


def _format(fmt: str) -> str:
    if fmt not in ("html", "pdf"):
        raise typer.BadParameter("html or pdf", param_hint="--format")
    return fmt


def _write(doc: Any, fmt: str, out: str) -> None:
    from tokenplane.reports.html import render_html
    from tokenplane.reports.pdf import render_pdf

    path = Path(out)
    if path.parent and not path.parent.exists():
        raise typer.BadParameter(f"{path.parent} does not exist", param_hint="--out")
    if fmt == "html":
        path.write_text(render_html(doc), encoding="utf-8")
    else:
        render_pdf(doc, path)
    typer.echo(f"wrote {path}")


def _prices(config: str | None) -> dict[str, tuple[Decimal, Decimal]]:
    """Per alias: (input, cached input) per 1M tokens, from the config (or the embedded
    default's)."""
    from tokenplane.compose.config_file import ConfigError, load_config

    try:
        cfg = load_config(config)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    return {m.alias: (m.prices.input, m.prices.cached_input
                      if m.prices.cached_input is not None else m.prices.input)
            for m in cfg.models}


def register(app: typer.Typer) -> None:
    report = typer.Typer(help="Cost and compliance reports (HTML or PDF).",
                         no_args_is_help=True)
    app.add_typer(report, name="report")

    @report.command("cost")
    def cost(month: MonthOpt, out: OutOpt, fmt: FormatOpt = "html", tenant: TenantOpt = None,
             config: ConfigOpt = None, home: Home = None, database_url: DbUrl = None,
             no_charts: NoCharts = False) -> None:
        """Spend by department and app, the trend against last month, the month-end
        forecast, the top drivers and the savings caching realised."""
        from tokenplane.metering.stores.open import open_sink
        from tokenplane.reports.build import cost_document
        from tokenplane.reports.gather import gather_cost

        m, fmt = _month(month), _format(fmt)
        prices = _prices(config)
        target = ledger_target(home, database_url, config)

        from tokenplane.cli.progress import Progress

        async def run(bar: Progress) -> Any:
            sink = await open_sink(target)
            try:
                return await gather_cost(sink, m, tenant, prices=prices,
                                         progress=lambda msg: bar.step(msg, 0))
            finally:
                await sink.close()

        with Progress(f"cost report {m}") as bar:
            data = asyncio.run(run(bar))
            bar.step(f"writing {fmt}", 0)
            _write(cost_document(data, charts=not no_charts), fmt, out)

    @report.command("compliance")
    def compliance(month: MonthOpt, out: OutOpt, fmt: FormatOpt = "html",
                   tenant: TenantOpt = None, config: ConfigOpt = None, home: Home = None,
                   key_file: Annotated[str | None, typer.Option(
                       help="The audit signing key (else governance.audit.key_file, "
                            "$TOKENPLANE_AUDIT_KEY or the data directory's).")] = None,
                   ) -> None:
        """PII detections by type and tenant, masking and blocks, injection flags,
        denied tool calls, the audit chain's verification and retention."""
        from tokenplane.compose.config_file import ConfigError, load_config
        from tokenplane.governance.audit.keyfile import resolve_key
        from tokenplane.governance.audit.signing import Verifier
        from tokenplane.reports.build import compliance_document
        from tokenplane.reports.gather import gather_compliance

        m, fmt = _month(month), _format(fmt)
        try:
            audit_cfg = load_config(config).governance.audit
        except ConfigError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from None
        root = data_dir(home, config, need="", explicit_ok=True)
        verifier, note = None, "The chains were not verified: no audit key was found."
        try:
            found = resolve_key(root, audit_cfg.key_env, key_file or audit_cfg.key_file,
                                create=False)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--key-file") from None
        if found is not None:
            verifier = Verifier.from_secret(found[0])
            note = ("Each log's hash chain, signed checkpoints and signed head were "
                    f"checked with the key from {found[1].where}.")
        from tokenplane.cli.progress import Progress

        with Progress(f"compliance report {m}") as bar:
            data = gather_compliance(
                root / "audit", m, tenant, verifier=verifier, key_note=note,
                retention=audit_cfg.retention, retention_days=audit_cfg.retention_days,
                progress=lambda msg: bar.step(msg, 0))
            bar.step(f"writing {fmt}", 0)
            _write(compliance_document(data), fmt, out)
