"""``tokenplane serve`` and ``tokenplane sim``."""

from __future__ import annotations

import asyncio
import atexit
import functools
import gc
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tokenplane.cli.startup_checks import DataDirLock, StartupError, startup_problems
from tokenplane.cli.supervisor import Supervisor
from tokenplane.compose.config_file import ConfigError, load_config
from tokenplane.compose.preflight import host_errors, preflight
from tokenplane.config.schema import GatewayConfig
from tokenplane.observe.peers import clear_last

if TYPE_CHECKING:
    from aiohttp import web

    from tokenplane.admission.stores.local_server import CounterServer


OPERATOR_TENANT = "_operator"  # the bootstrap admin key's own tenant, never a customer's


def _where_stored(cfg: GatewayConfig, home: Path) -> str:
    """Where the key hashes live: the PostgreSQL database (without its password) or the
    SQLite file under the data directory."""
    from urllib.parse import parse_qs, urlsplit

    from tokenplane.meta.pg_meta import is_postgres_url

    if cfg.database_url is not None and is_postgres_url(cfg.database_url):
        u = urlsplit(cfg.database_url)
        host = u.hostname or "localhost"
        port = f":{u.port}" if u.port else ""
        db = u.path.lstrip("/") or "(default database)"
        schema = parse_qs(u.query).get("schema")
        where = f" (schema {schema[0]})" if schema else ""
        return f"in the PostgreSQL metadata database {db}{where} on {host}{port}"
    return f"in {home / 'meta.db'}"


def _bootstrap(cfg: GatewayConfig, host: str, port: int) -> None:
    """On first start: the operator's own tenant and an admin key, printed once. The
    key belongs to ``_operator``, not to a configured tenant, so what the operator
    runs with it is never billed to a customer."""
    from tokenplane.meta.open_stores import open_key_store

    home = Path(cfg.data_dir or ".tokenplane")
    store = open_key_store(home, cfg.database_url)
    tenant = OPERATOR_TENANT
    try:
        if store.count_keys():
            return
        # several replicas may start at once on one database: exactly one creates it
        created = store.create_first_key(tenant, name="bootstrap")
    finally:
        store.close()
    if created is None:
        return
    key, rec = created
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    base = f"http://{host}:{port}/v1"
    model = cfg.models[0].alias
    typer.echo(f"""
First start: created the operator's tenant '{tenant}' and admin API key {rec.id} (its
usage is billed to '{tenant}', not to a customer; give tenants keys of their own with
`tokenplane keys create --tenant NAME`). Only the key's hash is stored,
{_where_stored(cfg, home)}; copy it now, it is not shown again:

    {key}

Try it:

    curl {base}/chat/completions -H "Authorization: Bearer {key}" \\
      -H "Content-Type: application/json" \\
      -d '{{"model": "{model}", "messages": [{{"role": "user", "content": "Hello!"}}]}}'

    python -c "from openai import OpenAI; c = OpenAI(base_url='{base}', api_key='{key}'); \\
print(c.chat.completions.create(model='{model}', \\
messages=[{{'role': 'user', 'content': 'Hello!'}}]))"

Lost this key? On this host, this makes another admin key (and `tokenplane keys revoke
{rec.id}` ends the lost one):

    {_recovery(cfg, home, tenant)}
""")


def _recovery(cfg: GatewayConfig, home: Path, tenant: str) -> str:
    """The command that makes another admin key in the store this one is in."""
    command = f"tokenplane keys create --tenant {tenant} --admin --name recovery"
    if cfg.database_url:  # never printed: it may carry a password
        return f"{command} --config YOUR_CONFIG.yaml   # or with $TOKENPLANE_DATABASE_URL set"
    return f"{command} --home {home.resolve()}"


def _run_worker(cfg_path: str | None, overrides: tuple[str, ...], host: str, port: int,
                workers: int, index: int, ready: Connection | None = None) -> None:
    import uvloop

    from tokenplane.app import build_app

    # a stop asked for while the worker starts (its siblings may already serve) is
    # kept and honoured once it is up, rather than killing it half-started
    early = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: early.set())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from tokenplane.api.front.limits import raise_nofile

    raise_nofile()  # the connection cap is derived from it (server.max_connections)
    cfg = load_config(cfg_path, overrides)
    # the loop gets the interpreter back soon from the threads counting and packing
    sys.setswitchinterval(cfg.server.thread_switch_ms / 1000)
    app = build_app(cfg, worker_id=f"w{index}", workers=workers)
    settle_heap()
    # one process serves: it says so itself; several: the supervisor does, once all serve
    banner = _banner(host, port, workers, cfg.observe.metrics.listen) if workers == 1 else None
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve(app, host, port, workers, banner, early, ready))


async def _serve(app: web.Application, host: str, port: int, workers: int,
                 banner: Callable[[str], None] | None, early: threading.Event,
                 ready: Connection | None = None) -> None:
    """The HTTP/1.1 front on host:port, the aiohttp application behind it, until SIGINT
    or SIGTERM; then a graceful stop (requests in flight get up to 30 s). ``ready``
    (a worker of ``--workers N``) tells the parent once the port is served."""
    from tokenplane.api.front.server import GatewayServer

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if early.is_set():
        stop.set()
    server = GatewayServer(app, host, port, reuse_port=workers > 1, shutdown_timeout=30)
    await server.start()
    try:
        if ready is not None:
            ready.send_bytes(b"serving")
            ready.close()
        if banner is not None and not stop.is_set():
            banner("")
        await stop.wait()
    finally:
        await server.stop()


def settle_heap() -> None:
    """Before serving: what start-up built (config, tokenizers, tables) lives as long as
    the process, so move it out of the collector's sight (``gc.freeze``) and let the
    youngest generation grow before a collection. A request allocates a few hundred
    container objects; with the defaults a full collection regularly walks every
    long-lived object for nothing."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)


def _host_counters(cfg: GatewayConfig, workers: int) -> CounterServer | None:
    """Without Redis, the workers of one host share the admission counters of a server
    on a thread of this (the parent) process, so limits hold across workers exactly as
    in one process. The socket's place reaches the workers through the environment."""
    from tokenplane.admission.stores.local_server import SOCKET_ENV, WORKERS_ENV, CounterServer

    if cfg.redis_url or not cfg.admission.enabled:
        return None
    place = Path(tempfile.mkdtemp(prefix="tokenplane-adm-"))
    server = CounterServer(place / "counters.sock")
    server.start()
    atexit.register(shutil.rmtree, place, True)
    os.environ[SOCKET_ENV] = str(server.path)
    os.environ[WORKERS_ENV] = str(workers)
    return server


def kernels_note() -> str | None:
    """A line saying the compiled kernels are not in use (None when they are)."""
    from tokenplane.context import unit_kernels
    from tokenplane.tokens import word_kernels

    if unit_kernels.COMPILED and word_kernels.COMPILED:
        return None
    return ("note: tokenplane's compiled kernels are not in use (not built at install: no C "
            "compiler or Python headers; or TOKENPLANE_NO_KERNELS is set): the pure-Python "
            "code gives the same results, RAG context packing is slower "
            "(docs/ARCHITECTURE.md, \"Compiled kernels\")")


def _banner(host: str, port: int, workers: int,
            metrics: str | None) -> Callable[[str], None]:
    def show(_: str) -> None:
        typer.echo(f"tokenplane gateway on http://{host}:{port} ({workers} worker(s)); "
                   "Ctrl-C to stop")
        if metrics is not None:
            typer.echo(f"Prometheus metrics on http://{metrics}/metrics")
        note = kernels_note()
        if note is not None:
            typer.echo(note, err=True)
    return show


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        config: Annotated[str | None, typer.Option(
            envvar="TOKENPLANE_CONFIG", help="YAML config (default: embedded).")] = None,
        host: Annotated[str | None, typer.Option(help="Address to bind.")] = None,
        port: Annotated[int | None, typer.Option(help="Port to bind.")] = None,
        workers: Annotated[
            int | None, typer.Option(help="Worker processes (SO_REUSEPORT).")
        ] = None,
        metrics_listen: Annotated[str | None, typer.Option(
            "--metrics-listen", metavar="HOST:PORT",
            help="Serve /metrics on a listener of its own (observe.metrics.listen).")] = None,
        settings: Annotated[list[str] | None, typer.Option(
            "--set", metavar="KEY=VALUE",
            help="Override one setting of the config (or of the embedded default), by its "
                 "dotted path: --set server.port=8081 --set data_dir=/data. Repeatable; "
                 "the value is YAML.")] = None,
    ) -> None:
        """Start the gateway (embedded default: simulated engines, SQLite ledger)."""
        overrides = tuple(settings or ())
        if metrics_listen is not None:
            overrides += (f"observe.metrics.listen={metrics_listen}",)
        try:
            cfg = load_config(config, overrides)
        except ConfigError as exc:
            for line in exc.errors:
                typer.echo(line, err=True)
            raise typer.Exit(2) from None
        found = preflight(cfg)  # what `config check` builds: refused here the same way
        missing = host_errors(cfg)  # and the secrets this host must give it
        for line in found.warnings:
            if not any(line.startswith(m) for m in missing):
                typer.echo(f"warning: {line}", err=True)
        for line in found.errors + missing:
            typer.echo(line, err=True)
        if found.errors or missing:
            raise typer.Exit(2)
        h = host or cfg.server.host
        p = port if port is not None else cfg.server.port
        n = workers or cfg.server.workers
        # nothing is created (the first start's admin key included) before these pass
        problems = startup_problems(cfg, h, p)
        hold = DataDirLock(Path(cfg.data_dir or ".tokenplane"))
        try:
            if not problems:
                hold.acquire()
        except StartupError as exc:
            problems.append(str(exc))
        for line in problems:
            typer.echo(line, err=True)
        if problems:
            raise typer.Exit(2)
        _bootstrap(cfg, h, p)
        if n == 1:
            _run_worker(config, overrides, h, p, 1, 0)
            return
        logging.basicConfig(level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(name)s %(message)s")
        clear_last(Path(cfg.data_dir or ".tokenplane") / "run")  # metrics count from zero
        counters = _host_counters(cfg, n)
        target = functools.partial(_run_worker, config, overrides, h, p, n)  # (index, ready)
        try:
            code = Supervisor(multiprocessing.get_context("spawn"), target, n,
                              on_all_serving=_banner(h, p, n, cfg.observe.metrics.listen)
                              ).run()
        finally:
            if counters is not None:
                counters.stop()
        sys.exit(code)

    @app.command()
    def sim(
        profile: Annotated[str, typer.Option(help="Engine profile.")] = "llama3-8b-a100",
        host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="First port; replica i listens on port+i "
                                          "(0: free ports). Prints 'ready PORT...' once "
                                          "every replica listens.")] = 8100,
        replicas: Annotated[int, typer.Option(help="Number of replicas.")] = 1,
        model: Annotated[
            str, typer.Option(help="Model name the replicas serve.")
        ] = "sim-llama3-8b",
        tokenizer: Annotated[str, typer.Option(help="Tokenizer spec.")] = "cl100k_base",
        chat_template: Annotated[str | None, typer.Option(help="Chat family.")] = "llama3",
        max_model_len: Annotated[int, typer.Option(help="Context window.")] = 8192,
        record_bodies: Annotated[bool, typer.Option(help="Keep request bodies at "
                                                    "/sim/requests.")] = False,
        tool_call_rate: Annotated[float, typer.Option(
            min=0.0, max=1.0, help="Share of tool_choice=auto requests answered with tool "
            "calls.")] = 0.5,
        reasoning: Annotated[bool | None, typer.Option(
            "--reasoning/--no-reasoning", help="Answer with reasoning tokens first (default: "
            "when the model name says reasoner, r1 or thinking).")] = None,
    ) -> None:
        """Run simulated engines standalone as OpenAI-compatible HTTP servers."""
        import uvloop

        from tokenplane.config.schema import ModelConfig
        from tokenplane.engine.behaviour import SimBehaviour
        from tokenplane.engine.serving.http_server import serve_replicas
        from tokenplane.tokens.model_counters import ModelCounters

        mc = ModelConfig(alias=model, tokenizer=tokenizer, chat_template=chat_template,
                         context_window=max_model_len, backends=[{"type": "sim"}])  # type: ignore[list-item]
        counters = ModelCounters([mc])
        typer.echo(f"simulated {profile} replicas on {host}:{port}..{port + replicas - 1}")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(serve_replicas(
                profile, host, port, replicas, model_name=model,
                tokenizer=counters.tokenizer(model), prompt_ids=counters.prompt_ids(model),
                max_model_len=max_model_len, record_bodies=record_bodies,
                behaviour=SimBehaviour(tool_call_rate, reasoning),
                on_ready=lambda ports: typer.echo("ready " + " ".join(map(str, ports))),
            ))
