"""Typed gateway configuration (YAML on disk, validated with pydantic)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tokenplane.config.autoscale_schema import AutoscaleConfig
from tokenplane.config.cache_schema import CacheConfig
from tokenplane.config.console_schema import ConsoleConfig
from tokenplane.config.context_schema import ContextConfig, OverflowConfig
from tokenplane.config.discovery_schema import DiscoveryConfig
from tokenplane.config.governance_schema import GovernanceConfig
from tokenplane.config.mcp_schema import McpConfig
from tokenplane.config.routing_schema import RoutingConfig, SchedulingConfig
from tokenplane.config.sessions_schema import SessionsConfig
from tokenplane.config.slo_schema import SloAlertingConfig, SloConfig
from tokenplane.config.validators import env_name, http_url

BackendType = Literal["openai", "vllm", "sglang", "sim", "anthropic"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimeoutConfig(_Strict):
    """Upstream timeouts in seconds; 0 disables one (README, docs/ROUTING.md).

    ``connect``: TCP (and TLS) connect. ``first_token``: a stream's head and first
    event. ``non_stream_head``: a non-stream answer's head (vLLM, SGLang and hosted
    APIs send it with the whole answer, so it bounds the generation: longer than any
    answer you expect). ``between_tokens``: the longest silence once the answer
    started (between a stream's events, between a non-stream body's bytes).
    ``total``: the whole call. ``connect`` answers 503 ``upstream_unavailable`` (after a
    retry elsewhere), the others 504 ``upstream_timeout`` (an error event mid-stream)."""

    connect: float = Field(5.0, ge=0)
    first_token: float = Field(60.0, ge=0)
    non_stream_head: float = Field(300.0, ge=0)
    between_tokens: float = Field(30.0, ge=0)
    total: float = Field(600.0, ge=0)


class PriceTier(_Strict):
    """Prices (per 1M tokens) that apply when the prompt exceeds ``above_input_tokens``."""

    above_input_tokens: int = Field(ge=0)
    input: Decimal | None = None
    cached_input: Decimal | None = None
    cache_write: Decimal | None = None
    cache_write_1h: Decimal | None = None
    output: Decimal | None = None
    reasoning: Decimal | None = None


class PriceConfig(_Strict):
    """A model's prices per 1M tokens (and per request), in ``currency``."""

    currency: str = "USD"
    input: Decimal = Decimal(0)
    cached_input: Decimal | None = None
    cache_write: Decimal | None = None  # per 1M tokens written to a 5-minute prompt cache
    cache_write_1h: Decimal | None = None  # to a 1-hour cache (default: cache_write)
    output: Decimal = Decimal(0)
    reasoning: Decimal | None = None
    per_request: Decimal = Decimal(0)
    tiers: list[PriceTier] = Field(default_factory=list)


class SimOptions(_Strict):
    """How a simulated backend's model behaves beyond its speed (engine/behaviour.py)."""

    tool_call_rate: float = Field(0.5, ge=0, le=1)  # tool_choice auto: share that calls
    reasoning: bool | None = None  # None: by the model's name (reasoner, r1, thinking)


class AnthropicOptions(_Strict):
    """A ``type: anthropic`` backend's Messages API settings (docs/MESSAGES.md)."""

    version: str = "2023-06-01"  # anthropic-version, when the client sent none
    betas: list[str] = Field(default_factory=list)  # anthropic-beta, added to the client's
    # max_tokens for requests that set none (Messages requires one)
    default_max_tokens: int = Field(4096, ge=1)
    # ask the backend's count_tokens for Messages prompts (Claude has no public tokenizer)
    count_tokens: bool = True


class BackendConfig(_Strict):
    """One upstream serving an alias: an OpenAI-compatible server or simulated replicas."""

    id: str | None = None
    type: BackendType
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    profile: str = "llama3-8b-a100"
    replicas: int = Field(1, ge=1, le=64)
    sim: SimOptions | None = None  # type sim only
    anthropic: AnthropicOptions | None = None  # type anthropic only
    model_version: str | None = None  # canary / A-B splits choose among versions
    # replicas found in Kubernetes or DNS instead of base_url (docs/DISCOVERY.md)
    discovery: DiscoveryConfig | None = None
    timeouts: TimeoutConfig = Field(default_factory=lambda: TimeoutConfig())  # type: ignore[call-arg]

    @model_validator(mode="before")
    @classmethod
    def _no_weight(cls, data: Any) -> Any:
        if isinstance(data, dict) and "weight" in data:
            raise ValueError("weight is not read: the routing profile picks among an "
                             "alias's backends (docs/ROUTING.md), and a canary split "
                             "weighs model versions (routing.splits); remove it")
        return data

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        url = http_url(v)
        return url.rstrip("/") if url is not None else None

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        return env_name(v)

    @model_validator(mode="after")
    def _needs_url(self) -> BackendConfig:
        if self.discovery is not None:
            if self.base_url is not None:
                raise ValueError("a backend has either base_url or discovery, not both")
            if self.replicas != 1:
                raise ValueError("replicas is for simulated replicas in the gateway's "
                                 "process; a discovered backend has the replicas it finds")
        elif self.type != "sim" and self.base_url is None:
            raise ValueError(f"base_url (or discovery) is required for a backend of type "
                             f"{self.type}")
        if self.type != "anthropic" and self.anthropic is not None:
            raise ValueError("anthropic options apply to type anthropic only")
        if self.type != "sim" and self.sim is not None:
            raise ValueError("sim options are for backends of type sim")
        return self


class ModelConfig(_Strict):
    """A model alias that clients name in ``model``."""

    alias: str = Field(min_length=1)
    # a tokenizer spec or model name; "estimate" (or one that cannot be loaded) counts
    # with the calibrated estimator and flags the counts "input_estimated"
    tokenizer: str = "cl100k_base"
    chat_template: str | None = None
    context_window: int = Field(8192, ge=16)
    prices: PriceConfig = Field(default_factory=lambda: PriceConfig())
    backends: list[BackendConfig] = Field(min_length=1)
    fallbacks: list[str] = Field(default_factory=list)  # aliases to spill to, in order
    overflow: OverflowConfig | None = None  # a prompt over the window (None: reject)


class DepartmentConfig(_Strict):
    name: str = Field(min_length=1)
    apps: list[str] = Field(default_factory=list)


class TenantConfig(_Strict):
    name: str = Field(min_length=1)
    departments: list[DepartmentConfig] = Field(default_factory=list)
    models: list[str] | None = None


_CORS_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
                         "ABCDEFGHIJKLMNOPQRSTUVWXYZ")  # RFC 9110's tchar


class CorsConfig(_Strict):
    """Cross-origin requests from browsers (``server.cors``; off when absent).
    ``allow_origins``: exact origins (``https://app.example.com``, scheme, host and a
    port if not the default) or ``"*"`` (any). A preflight (``OPTIONS`` with
    ``Access-Control-Request-Method``) from an allowed origin asking for an allowed
    method and headers is answered 204 with the ``Access-Control-Allow-*`` headers,
    else 403 without them; an actual answer to an allowed origin (errors and streams
    included) carries ``Access-Control-Allow-Origin`` (the origin itself) and
    ``Vary: Origin``. ``allow_headers`` ``["*"]``: whatever the preflight asks for
    (browser SDKs send their own ``x-stainless-*`` headers). ``allow_credentials``
    (cookies: the console's session) needs listed origins, never ``"*"``."""

    allow_origins: list[str] = Field(min_length=1)
    allow_methods: list[str] = Field(default_factory=lambda: list(_CORS_METHODS),
                                     min_length=1)
    allow_headers: list[str] = Field(default_factory=lambda: ["*"])
    expose_headers: list[str] = Field(default_factory=lambda: [
        "x-request-id", "request-id", "retry-after", "x-ratelimit-limit-requests",
        "x-ratelimit-limit-tokens", "x-ratelimit-remaining-requests",
        "x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens"])
    max_age_s: int = Field(600, ge=0, le=86_400)
    allow_credentials: bool = False

    @field_validator("allow_origins")
    @classmethod
    def _origins(cls, v: list[str]) -> list[str]:
        out = []
        for origin in v:
            if origin == "*":
                out.append(origin)
                continue
            scheme, sep, rest = origin.partition("://")
            if scheme not in ("http", "https") or not sep or not rest or "/" in rest \
                    or any(c.isspace() for c in rest) or rest.endswith(":"):
                raise ValueError(f"{origin!r} is not an origin: scheme://host[:port] (http or "
                                 "https, no path, no trailing slash) or '*'")
            out.append(origin.lower())
        return out

    @field_validator("allow_methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        out = [m.upper() for m in v]
        for m in out:
            if not m or not set(m) <= _TOKEN_CHARS:
                raise ValueError(f"{m!r} is not an HTTP method")
        return out

    @field_validator("allow_headers", "expose_headers")
    @classmethod
    def _headers(cls, v: list[str]) -> list[str]:
        out = [h.lower() for h in v]
        for h in out:
            if h != "*" and (not h or not set(h) <= _TOKEN_CHARS):
                raise ValueError(f"{h!r} is not a header name")
        return out

    @model_validator(mode="after")
    def _credentials(self) -> CorsConfig:
        if self.allow_credentials and "*" in self.allow_origins:
            raise ValueError("allow_credentials needs the origins listed: with '*' any site "
                             "could send its visitors' cookies")
        return self


class ServerConfig(_Strict):
    """The public HTTP server. Its defences against slow and many clients
    (docs/ARCHITECTURE.md, "Slow and many clients"): the request head must arrive
    whole within ``header_timeout_s`` (counted from its first byte; on a new
    connection from the accept); the body within ``body_timeout_s`` plus one second
    per ``body_min_rate`` bytes received (Apache's mod_reqtimeout rule; 0: the body
    has ``body_timeout_s`` in all); an idle keep-alive connection closes after
    ``keepalive_s``. Each worker holds at most ``max_connections`` client connections
    (default: from the open-file limit, which ``serve`` raises to its hard limit) and
    ``max_connections_per_address`` from one client address (0: no per-address cap;
    behind a proxy or NAT every client shares its address: raise it or set 0).
    Connections over a cap get a 503 with ``retry-after`` and are closed. ``cors``:
    browsers on other origins (:class:`CorsConfig`; off when absent)."""

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    workers: int = Field(1, ge=1, le=64)
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    # a stream whose client reads nothing for this long is ended (cancelled, billed
    # what was relayed); 0: never (like nginx's send_timeout, 60 s)
    stream_stall_timeout_s: float = Field(60.0, ge=0)
    header_timeout_s: float = Field(20.0, gt=0, le=3600)
    body_timeout_s: float = Field(20.0, gt=0, le=3600)
    body_min_rate: int = Field(500, ge=0)
    keepalive_s: float = Field(75.0, gt=0, le=3600)
    max_connections: int | None = Field(None, ge=1)
    max_connections_per_address: int = Field(256, ge=0)
    # how long a worker thread (a large prompt counted, documents packed off the
    # loop) may hold the interpreter before the event loop gets it back (Python's
    # switch interval, 5 ms by default: each of a request's waits on the loop could
    # cost that much while such work runs)
    thread_switch_ms: float = Field(1.0, gt=0, le=100)
    cors: CorsConfig | None = None  # browsers on other origins (off: no CORS headers)


class AdmissionConfig(_Strict):
    """Budgets and rate limits (docs/ADMISSION.md). The limits themselves live in the
    data store (``tokenplane limits``, ``/admin/v1/limits``); ``redis_url`` (or
    $TOKENPLANE_REDIS_URL) shares the counters between replicas, else in-process."""

    enabled: bool = True
    failure_mode: Literal["fail_closed", "fail_open"] = "fail_closed"
    replicas: int = Field(1, ge=1, le=4096)
    default_output_tokens: int = Field(256, ge=1)
    predict_output: bool = True
    debit_granularity: int = Field(16, ge=1, le=100_000)
    clamp_max_tokens: bool = False
    # bodies refused for their size (context_length_exceeded) a key may send, in
    # bytes a second and saved up; past them its calls get 429 until it has refilled
    refused_bytes_per_s: int = Field(1_000_000, ge=1)
    refused_bytes_burst: int = Field(16_000_000, ge=1)
    reservation_ttl_s: float = Field(900.0, gt=0)
    # concurrency units are leases renewed by each worker's heartbeat: a dead worker's
    # come back within lease_s (shared stores only; one process needs none)
    lease_s: float = Field(5.0, gt=0, le=3600)
    heartbeat_s: float = Field(1.0, gt=0, le=600)
    key_prefix: str = Field("tp:adm:", min_length=1)
    timeout_s: float = Field(0.5, gt=0)
    probe_interval_s: float = Field(1.0, ge=0)
    limits_reload_s: float = Field(1.0, ge=0)
    alert_webhook: str | None = None

    @field_validator("alert_webhook")
    @classmethod
    def _webhook(cls, v: str | None) -> str | None:
        return http_url(v)

    @model_validator(mode="after")
    def _lease_outlives_beats(self) -> AdmissionConfig:
        if self.lease_s < 2 * self.heartbeat_s:
            raise ValueError(
                f"lease_s ({self.lease_s}) must be at least twice heartbeat_s "
                f"({self.heartbeat_s}), or live requests lose their concurrency units")
        return self


PrincipalLabel = Literal["tenant", "department", "app"]


def _default_labels() -> list[PrincipalLabel]:
    return ["tenant"]


class AccessLogConfig(_Strict):
    """One JSON line per request (docs/LEDGER.md, "Access log"): to stderr, or appended
    to ``path``. ``sample`` is the share of successful requests written; errors are
    always written."""

    enabled: bool = True
    sample: float = Field(1.0, ge=0, le=1)
    path: str | None = None  # None: stderr

    @field_validator("path")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or "\x00" in v):
            raise ValueError("must be a file path (or unset for stderr)")
        return v


class MetricsConfig(_Strict):
    """Where Prometheus scrapes ``GET /metrics`` (it names every tenant's traffic and
    cost, so it is not public by default).

    ``listen``: a listener of its own, ``host:port`` (default ``127.0.0.1:9464``, on
    loopback like Envoy's admin port; ``null``: none). With ``--workers N`` every
    worker listens there and any of them answers the whole gateway's series, summed.
    ``token_env``: the name of an environment variable holding a bearer token; when
    set, the listener requires it too. On the gateway's public port ``/metrics``
    answers only that token or an admin key (401 without a valid one, 403 for a key
    without the admin scope)."""

    listen: str | None = "127.0.0.1:9464"
    token_env: str | None = None

    @field_validator("listen")
    @classmethod
    def _host_port(cls, v: str | None) -> str | None:
        if v is not None:
            listen_address(v)
        return v

    @field_validator("token_env")
    @classmethod
    def _env(cls, v: str | None) -> str | None:
        return env_name(v)


def listen_address(v: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:9464`` for IPv6) as (host, port); ValueError if not."""
    host, sep, port = v.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("must be host:port, e.g. 127.0.0.1:9464")
    return host, int(port)


class ObserveConfig(_Strict):
    """Observability: which principal levels become Prometheus labels (never keys or end
    users: unbounded), where ``/metrics`` is served, where OpenTelemetry spans go (OTLP
    over HTTP; none if unset), and the access log."""

    access_log: AccessLogConfig = Field(default_factory=lambda: AccessLogConfig())  # type: ignore[call-arg]
    labels: list[PrincipalLabel] = Field(default_factory=_default_labels)
    metrics: MetricsConfig = Field(default_factory=lambda: MetricsConfig())
    otlp_endpoint: str | None = None
    otlp_headers: dict[str, str] = Field(default_factory=dict)
    service_name: str = Field("tokenplane", min_length=1)

    @field_validator("labels")
    @classmethod
    def _unique_labels(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("labels must not repeat")
        return v

    @field_validator("otlp_endpoint")
    @classmethod
    def _otlp_url(cls, v: str | None) -> str | None:
        return http_url(v)


class MeteringConfig(_Strict):
    """When a usage record counts as durable, so the answer may complete.

    ``written`` (the default): once it is written to the journal file, so it survives a
    crash or ``kill -9`` of the gateway; the group ``fdatasync`` runs right behind it,
    and a power loss of the host can lose at most the records of the sync in flight
    (docs/LEDGER.md). ``synced``: once it is fsynced (like PostgreSQL's
    ``synchronous_commit: on``): nothing acknowledged is lost even then, at the cost of
    waiting for the disk on every answer."""

    ack: Literal["written", "synced"] = "written"


class ModelMapRule(_Strict):
    """A model name clients send (exact, or a glob such as ``claude-*``) mapped to an
    alias, for every tenant or only those listed (docs/MESSAGES.md, "Model names")."""

    match: str = Field(min_length=1)
    alias: str = Field(min_length=1)
    tenants: list[str] | None = None


class GatewayConfig(_Strict):
    """The whole configuration. ``data_dir`` defaults to $TOKENPLANE_HOME or ./.tokenplane."""

    server: ServerConfig = Field(default_factory=lambda: ServerConfig())  # type: ignore[call-arg]
    data_dir: str | None = None
    database_url: str | None = None
    redis_url: str | None = None
    admission: AdmissionConfig = Field(default_factory=lambda: AdmissionConfig())  # type: ignore[call-arg]
    observe: ObserveConfig = Field(default_factory=lambda: ObserveConfig())  # type: ignore[call-arg]
    governance: GovernanceConfig = Field(default_factory=lambda: GovernanceConfig())  # type: ignore[call-arg]
    routing: RoutingConfig = Field(default_factory=lambda: RoutingConfig())  # type: ignore[call-arg]
    scheduling: SchedulingConfig = Field(default_factory=lambda: SchedulingConfig())  # type: ignore[call-arg]
    metering: MeteringConfig = Field(default_factory=lambda: MeteringConfig())
    context: ContextConfig = Field(default_factory=lambda: ContextConfig())  # type: ignore[call-arg]
    sessions: SessionsConfig = Field(default_factory=lambda: SessionsConfig())  # type: ignore[call-arg]
    cache: CacheConfig | None = None  # response caches (docs/CACHE.md); None: none
    models: list[ModelConfig] = Field(min_length=1)
    model_map: list[ModelMapRule] = Field(default_factory=list)  # client names -> aliases
    tenants: list[TenantConfig] = Field(default_factory=list)
    slos: list[SloConfig] = Field(default_factory=list)
    slo_alerting: SloAlertingConfig = Field(
        default_factory=lambda: SloAlertingConfig())  # type: ignore[call-arg]
    autoscale: AutoscaleConfig = Field(default_factory=lambda: AutoscaleConfig())  # type: ignore[call-arg]
    console: ConsoleConfig = Field(default_factory=lambda: ConsoleConfig())
    mcp: McpConfig | None = None  # the MCP gateway (docs/MCP.md); None: no /mcp routes
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique_aliases(self) -> GatewayConfig:
        seen: set[str] = set()
        for m in self.models:
            if m.alias in seen:
                raise ValueError(f"duplicate model alias {m.alias!r}")
            seen.add(m.alias)
        for m in self.models:
            bad = [f for f in m.fallbacks if f not in seen or f == m.alias]
            if bad:
                raise ValueError(f"model {m.alias!r}: unknown fallback aliases {bad}")
        return self

    @model_validator(mode="after")
    def _overflow_fallbacks(self) -> GatewayConfig:
        for m in self.models:
            target = m.overflow.fallback if m.overflow is not None else None
            if target is None:
                continue
            other = self.model(target)
            if other is None or target == m.alias:
                raise ValueError(f"model {m.alias!r}: overflow.fallback {target!r} is not "
                                 "another model alias")
            if other.context_window <= m.context_window:
                raise ValueError(f"model {m.alias!r}: overflow.fallback {target!r} has a "
                                 f"window of {other.context_window} tokens, not larger than "
                                 f"{m.context_window}")
        return self

    @model_validator(mode="after")
    def _mcp_references(self) -> GatewayConfig:
        mcp = self.mcp
        if mcp is None:
            return self
        if mcp.sessions == "redis" and not self.redis_url:
            raise ValueError("mcp.sessions is redis but no redis_url is set")
        if mcp.accounting_model is not None and self.model(mcp.accounting_model) is None:
            raise ValueError(f"mcp.accounting_model {mcp.accounting_model!r} is not a model "
                             "alias")
        return self

    @model_validator(mode="after")
    def _cache_references(self) -> GatewayConfig:
        cache = self.cache
        if cache is None:
            return self
        if cache.store == "redis" and not self.redis_url:
            raise ValueError("cache.store is redis but no redis_url is set")
        aliases = {m.alias for m in self.models}
        tenants = {t.name for t in self.tenants}
        for i, rule in enumerate(cache.rules):
            if rule.model is not None and rule.model not in aliases:
                raise ValueError(f"cache.rules[{i}].model: unknown model alias {rule.model!r}")
            if rule.tenant is not None and tenants and rule.tenant not in tenants:
                raise ValueError(f"cache.rules[{i}].tenant: unknown tenant {rule.tenant!r}")
        return self

    @model_validator(mode="after")
    def _slo_references(self) -> GatewayConfig:
        names: set[str] = set()
        classes = set(self.scheduling.class_specs())
        for i, slo in enumerate(self.slos):
            if slo.name in names:
                raise ValueError(f"slos[{i}]: duplicate SLO name {slo.name!r}")
            names.add(slo.name)
            sel = slo.selector
            if sel.model is not None and self.model(sel.model) is None:
                raise ValueError(f"slos[{i}].selector.model: no model alias {sel.model!r}")
            if slo.protect is not None and not self.scheduling.enabled:
                raise ValueError(f"slos[{i}].protect: needs scheduling.enabled (it admits "
                                 "classes through the gateway's queues)")
            for cls in slo.protect.classes if slo.protect is not None else ():
                if cls not in classes:
                    raise ValueError(f"slos[{i}].protect.classes: no SLO class {cls!r}")
            if sel.slo_class is not None and sel.slo_class not in classes:
                raise ValueError(
                    f"slos[{i}].selector.slo_class: no SLO class {sel.slo_class!r} "
                    f"(known: {', '.join(sorted(classes))})"
                )
        for alias, split in self.routing.splits.items():
            if split.guard is not None and split.guard.slo not in names:
                raise ValueError(f"routing.splits.{alias}.guard.slo: no SLO named "
                                 f"{split.guard.slo!r} in slos")
        return self

    def model(self, alias: str) -> ModelConfig | None:
        for m in self.models:
            if m.alias == alias:
                return m
        return None
