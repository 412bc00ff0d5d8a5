"""Everything ``serve`` builds from a config that can be built without binding a port,
opening a store or calling an upstream: tokenizers and chat templates, engine
profiles, the price book, the routing profiles and splits, the SLO classes, the guard
policies (PII recognizers included). ``tokenplane config check`` and ``serve`` both
run :func:`preflight`, so whatever ``serve`` would refuse, ``check`` refuses first,
with the path; ``app.build_gateway`` builds the counters with :func:`build_counters`.

Warnings are things ``serve`` runs with but that are probably not meant: an upstream
key variable that is not set, a base URL that looks wrong for its backend type, a
tokenizer name that will be estimated."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenplane.api.metrics_routes import metrics_token
from tokenplane.config.mcp_schema import McpConfig
from tokenplane.config.schema import BackendConfig, GatewayConfig
from tokenplane.engine.profiles import get_profile
from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.custom import recognizer_from_spec
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.mcp.arguments import schema_problem
from tokenplane.metering.price_book import price_book
from tokenplane.routing.gateway.router import split_rule
from tokenplane.routing.plugins import RoutingContext
from tokenplane.routing.profiles import build_profile
from tokenplane.routing.registry import default_registry
from tokenplane.scheduling.slo import slo_classes_from_config
from tokenplane.tokens.model_counters import ESTIMATE, ModelCounters
from tokenplane.tokens.registry import TokenizerRegistry, UnknownTokenizerError
from tokenplane.upstream.http_transport import versioned

_ANALYZER_KEYS = frozenset({"builtin", "custom", "min_score", "entities", "presidio"})


class BuildError(Exception):
    """A config that validates but cannot be built; ``errors`` are 'path: message'."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


@dataclass
class Findings:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def build_counters(config: GatewayConfig,
                   registry: TokenizerRegistry | None = None) -> ModelCounters:
    """The gateway's counters; BuildError naming the model's field for a tokenizer
    spec that cannot be loaded or an unknown chat template."""
    registry = registry or TokenizerRegistry()
    errors = []
    for i, m in enumerate(config.models):
        try:
            ModelCounters([m], registry=registry)
        except UnknownTokenizerError as exc:
            errors.append(f"models[{i}].tokenizer: {exc} (or say 'estimate' to count with "
                          "the calibrated estimator)")
        except ValueError as exc:
            errors.append(f"models[{i}].chat_template: {exc}")
    if errors:
        raise BuildError(errors)
    return ModelCounters(config.models, registry=registry)


def preflight(config: GatewayConfig, env: Mapping[str, str] | None = None) -> Findings:
    """Build every pure part of the gateway; collect what fails (errors) and what will
    run but is probably wrong (warnings)."""
    env = os.environ if env is None else env
    out = Findings()
    try:
        counters = build_counters(config)
    except BuildError as exc:
        out.errors += exc.errors
    else:
        for i, m in enumerate(config.models):
            if counters.is_estimated(m.alias) and m.tokenizer != ESTIMATE:
                out.warnings.append(
                    f"models[{i}].tokenizer: {m.tokenizer!r} names no tokenizer; prompts "
                    "are counted with the calibrated estimator (say 'estimate' to mean it)")
    for i, m in enumerate(config.models):
        for j, b in enumerate(m.backends):
            where = f"models[{i}].backends[{j}]"
            if b.type == "sim" and b.base_url is None:
                try:
                    get_profile(b.profile)
                except KeyError as exc:
                    out.errors.append(f"{where}.profile: {exc.args[0]}")
            out.warnings += backend_warnings(b, where, env)
    try:
        price_book(config.models)
    except ValueError as exc:
        out.errors.append(f"models: prices: {exc}")
    out.errors += _routing_errors(config)
    try:
        slo_classes_from_config(config.scheduling.class_specs())
    except (ValueError, TypeError) as exc:
        out.errors.append(f"scheduling.classes: {exc}")
    out.errors += _governance_errors(config)
    out.errors += mcp_errors(config.mcp)
    out.warnings += mcp_warnings(config.mcp, env)
    # the environment is the host's, not the file's (check runs where secrets are
    # absent, as in CI): warnings here; serve, on its host, refuses to start on them
    out.warnings += [f"{e}; serve refuses to start until it is set" for e in host_errors(config)]
    return out


def host_errors(config: GatewayConfig) -> list[str]:
    """What this host's environment lacks for ``config``: the secrets serve must have
    (the metrics token; an upstream's key is only warned about, as the upstream may
    want none)."""
    try:
        metrics_token(config.observe.metrics)  # the token serve's /metrics will want
    except ValueError as exc:
        return [str(exc)]
    return []


def backend_warnings(b: BackendConfig, where: str, env: Mapping[str, str]) -> list[str]:
    """An unset key variable; a base URL that looks wrong for the backend's type."""
    out = []
    if b.api_key_env is not None and not env.get(b.api_key_env):
        header = "an x-api-key" if b.type == "anthropic" else "an Authorization"
        out.append(f"{where}.api_key_env: ${b.api_key_env} is not set; requests go "
                   f"upstream without {header} header")
    if b.base_url is None:
        return out
    if b.type == "openai" and not versioned(b.base_url):
        out.append(f"{where}.base_url: {b.base_url} has no API version path; for type "
                   "openai give the base URL as the OpenAI SDK takes it (ending in /v1, "
                   "e.g. https://api.openai.com/v1): the request path follows it")
    elif b.type in ("vllm", "sglang") and versioned(b.base_url):
        out.append(f"{where}.base_url: {b.base_url} ends in an API version; for type "
                   f"{b.type} give the server's root (http://host:8000): /metrics is "
                   "scraped from there and the request path is appended")
    return out


def _routing_errors(config: GatewayConfig) -> list[str]:
    rc = config.routing
    registry = default_registry()
    out = []
    for m in config.models:
        ctx = RoutingContext(block_size=rc.block_size,
                             prefix_capacity_blocks=rc.prefix_capacity_blocks)
        where = f"routing.models.{m.alias}" if m.alias in rc.models else "routing.profile"
        try:
            build_profile(rc.models.get(m.alias, rc.profile), ctx, registry)
        except (ValueError, KeyError, TypeError) as exc:
            out.append(f"{where}: {exc}")
    for alias, split in rc.splits.items():
        try:
            split_rule(split)
        except (ValueError, TypeError) as exc:
            out.append(f"routing.splits.{alias}: {exc}")
    return sorted(set(out), key=out.index)


def mcp_errors(mcp: McpConfig | None) -> list[str]:
    """The argument rules' JSON Schemas outside the supported subset."""
    out: list[str] = []
    for i, rule in enumerate(mcp.rules if mcp is not None else []):
        for j, a in enumerate(rule.arguments):
            if a.json_schema is not None:
                bad = schema_problem(a.json_schema)
                if bad:
                    out.append(f"mcp.rules[{i}].arguments[{j}].{bad}")
    return out


def mcp_warnings(mcp: McpConfig | None, env: Mapping[str, str]) -> list[str]:
    """Header variables the host does not set (the header is then not sent)."""
    return [f"mcp.servers[{i}].headers_env.{h}: ${v} is not set; the header is not sent"
            for i, s in enumerate(mcp.servers if mcp is not None else [])
            for h, v in s.headers_env.items() if v not in env]


def _governance_errors(config: GatewayConfig) -> list[str]:
    gov = config.governance
    analyzer: dict[str, Any] = gov.pii.analyzer
    out = [f"governance.pii.analyzer.{k}: unknown field; known: {sorted(_ANALYZER_KEYS)}"
           for k in analyzer if k not in _ANALYZER_KEYS]
    custom = analyzer.get("custom") or []
    if not isinstance(custom, list):
        out.append("governance.pii.analyzer.custom: must be a list of recognizer specs")
        custom = []
    for i, spec in enumerate(custom):
        try:
            if not isinstance(spec, dict):
                raise ValueError("a recognizer spec is a mapping (type, entity, ...)")
            recognizer_from_spec(spec)
        except (ValueError, KeyError, TypeError) as exc:
            out.append(f"governance.pii.analyzer.custom[{i}]: {_text(exc)}")
    if out or not gov.enabled:
        return out
    try:
        Analyzer.from_config(analyzer)
        GuardPolicies(gov)
    except (ValueError, KeyError, TypeError) as exc:
        out.append(f"governance: {_text(exc)}")
    return out


def _text(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args:
        return f"missing {exc.args[0]!r}"
    return str(exc)
