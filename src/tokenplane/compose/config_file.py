"""Load a config from YAML (or the embedded default) and report errors with paths.

The schema (``tokenplane.config``) checks shapes and values; what only the policy code
knows (routing profile and plugin names) is checked here, above both, so the schema
imports nothing of tokenplane."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tokenplane.compose.overrides import OverrideError, apply_overrides
from tokenplane.config.schema import GatewayConfig
from tokenplane.routing.profiles import check_profile


class ConfigError(Exception):
    """A config that failed validation; ``errors`` holds 'path: message' lines."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def default_config_dict() -> dict[str, Any]:
    """The embedded default: one simulated alias on two in-process replicas."""
    return {
        "models": [
            {
                "alias": "sim-llama3-8b",
                "tokenizer": "cl100k_base",
                "chat_template": "llama3",
                "context_window": 8192,
                "prices": {"input": "0.10", "cached_input": "0.05", "output": "0.40"},
                "backends": [
                    {"id": "sim", "type": "sim", "profile": "llama3-8b-a100", "replicas": 2}
                ],
            }
        ],
        "tenants": [{"name": "default"}],
    }


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, bool):  # a YAML 1.1 boolean used as a mapping key
            out += ("." if out else "") + str(part).lower()
        elif isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(root)"


def _message(err: dict[str, Any]) -> str:
    msg = str(err.get("msg", "invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    if err.get("type") == "extra_forbidden":
        return "unknown field"
    if err.get("type") == "missing":
        return "required field missing"
    return msg


def _schema_errors(exc: ValidationError) -> tuple[list[str], list[tuple[Any, ...]]]:
    """'path: message' lines of a failed validation, and each error's location in the
    data (the pydantic location less its union tags)."""
    lines: list[str] = []
    locs: list[tuple[Any, ...]] = []
    for err in exc.errors():
        raw = err["loc"]
        loc = tuple(p for p in raw if not (isinstance(p, str) and "[" in p))
        msg = _message(dict(err))
        locs.append(loc)
        if raw and raw[-1] == "[key]" and isinstance(err.get("input"), bool):
            loc = (*loc[:-1], err["input"])  # pydantic reports the key True as 1
            msg += (" (YAML reads an unquoted yes/no/on/off/true/false as a boolean: "
                    "quote the key)")
        lines.append(f"{_path(loc)}: {msg}")
    return lines, locs


def validate_config(data: Any) -> GatewayConfig:
    if not isinstance(data, dict):
        raise ConfigError(["(root): the config must be a mapping"])
    try:
        cfg = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_schema_errors(exc)[0]) from None
    lines = _policy_errors(cfg)
    if lines:
        raise ConfigError(lines)
    return cfg


def _pruned(data: Any, locs: list[tuple[Any, ...]]) -> Any | None:
    """A copy of ``data`` without the mapping keys the errors are at (the schema's
    default stands in for each), or None where an error is not at a mapping key that
    is there (a missing field, a bad list item: removing it would renumber the rest)."""
    out = copy.deepcopy(data)
    for loc in locs:
        node: Any = out
        for part in loc[:-1]:
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                return None
        last = loc[-1] if loc else None
        if not isinstance(node, dict) or last not in node:
            return None
        del node[last]
    return out


def check_data(data: Any) -> tuple[GatewayConfig | None, list[str]]:
    """Every error of the file that can be found in one pass, stage after stage: the
    schema's; then, on the file less the fields those name (their defaults standing in),
    the cross-references and policy names, so one run reports what used to take a run
    per stage. The config is None when the schema's errors leave nothing to go on."""
    if not isinstance(data, dict):
        return None, ["(root): the config must be a mapping"]
    try:
        return _checked(GatewayConfig.model_validate(data), [])
    except ValidationError as exc:
        errors, locs = _schema_errors(exc)
    rest = _pruned(data, locs)
    if rest is None:
        return None, errors
    try:
        cfg = GatewayConfig.model_validate(rest)
    except ValidationError:
        return None, errors  # what is left fails too: the schema's errors alone
    return _checked(cfg, errors)


def _checked(cfg: GatewayConfig, errors: list[str]) -> tuple[GatewayConfig, list[str]]:
    return cfg, errors + _policy_errors(cfg)


def _policy_errors(cfg: GatewayConfig) -> list[str]:
    """Routing profiles that name no profile of the table or an unknown plugin, and
    every cross-reference of the file (:func:`reference_errors`)."""
    out = reference_errors(cfg) + autoscale_errors(cfg)
    try:
        check_profile(cfg.routing.profile)
    except ValueError as exc:
        out.append(f"routing.profile: {exc}")
    for alias, spec in cfg.routing.models.items():
        try:
            check_profile(spec)
        except ValueError as exc:
            out.append(f"routing.models: {alias}: {exc}")
    return out


_DB_SCHEMES = ("postgresql://", "postgres://")
_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def store_url_errors(database_url: str | None, redis_url: str | None,
                     where: str = "") -> list[str]:
    """``database_url`` must be PostgreSQL (SQLite is the default, under ``data_dir``:
    no URL), ``redis_url`` a Redis URL; anything else would be misread by serve."""
    out = []
    if database_url is not None and not database_url.startswith(_DB_SCHEMES):
        scheme = database_url.partition(":")[0] or database_url
        out.append(f"{where or 'database_url'}: {scheme!r} is not supported: give a "
                   "postgresql:// URL, or no database_url for SQLite under data_dir")
    if redis_url is not None and not redis_url.startswith(_REDIS_SCHEMES):
        out.append(f"{where or 'redis_url'}: not a Redis URL (redis://, rediss:// or "
                   "unix://)")
    return out


def autoscale_errors(cfg: GatewayConfig) -> list[str]:
    """Each autoscaled pool names a model alias, and its actuator can scale that
    alias's backends (embedded: one ``type: sim`` backend without ``base_url``)."""
    out = []
    for alias, pool in cfg.autoscale.pools.items():
        where = f"autoscale.pools.{alias}"
        m = cfg.model(alias)
        if m is None:
            out.append(f"{where}: no model alias {alias!r}; known: "
                       f"{sorted(x.alias for x in cfg.models)}")
            continue
        local = all(b.type == "sim" and b.base_url is None and b.discovery is None
                    for b in m.backends)
        if pool.actuator is None and not local:
            out.append(f"{where}.actuator: required, as {alias!r} has backends that are "
                       "not in-process simulated replicas (set kubernetes or keda)")
        elif (pool.actuator or "embedded") == "embedded":
            if not local:
                out.append(f"{where}.actuator: embedded scales only type: sim backends "
                           f"without base_url, and {alias!r} has others")
            elif len(m.backends) != 1:
                out.append(f"{where}.actuator: embedded scales an alias with one backend "
                           f"({alias!r} has {len(m.backends)})")
            elif pool.min_replicas < 1:
                out.append(f"{where}.min_replicas: the embedded actuator keeps at least one "
                           "replica (at zero, requests would be refused while one starts)")
        elif pool.actuator == "keda" and cfg.autoscale.keda.listen is None:
            out.append(f"{where}.actuator: keda needs autoscale.keda.listen (where KEDA's "
                       "operator reads the decisions)")
    keda_pools = [a for a, p in cfg.autoscale.pools.items() if p.actuator == "keda"]
    if cfg.autoscale.keda.listen is not None and not keda_pools:
        out.append("autoscale.keda.listen: set, but no pool has actuator: keda (nothing "
                   "to serve KEDA)")
    return out


def reference_errors(cfg: GatewayConfig) -> list[str]:
    """What the schema cannot see field by field: duplicate names, names that point at
    nothing, one currency for the price book, the store URLs."""
    out = store_url_errors(cfg.database_url, None)
    if cfg.redis_url is not None:
        out += store_url_errors(None, cfg.redis_url)
    aliases = {m.alias for m in cfg.models}
    versions: dict[str, set[str]] = {}
    ids: dict[str, str] = {}
    currency = cfg.models[0].prices.currency
    for i, m in enumerate(cfg.models):
        versions[m.alias] = {b.model_version for b in m.backends if b.model_version}
        if m.prices.currency != currency:
            out.append(f"models[{i}].prices.currency: {m.prices.currency!r} differs from "
                       f"{currency!r} of models[0]; the ledger prices in one currency")
        for j, b in enumerate(m.backends):
            if b.id is None:
                continue
            if b.id in ids:
                out.append(f"models[{i}].backends[{j}].id: duplicate backend id {b.id!r} "
                           f"(also {ids[b.id]})")
            else:
                ids[b.id] = f"models[{i}].backends[{j}]"
    seen: set[str] = set()
    for i, t in enumerate(cfg.tenants):
        if t.name in seen:
            out.append(f"tenants[{i}].name: duplicate tenant {t.name!r}")
        seen.add(t.name)
        for j, a in enumerate(t.models or []):
            if a not in aliases:
                out.append(f"tenants[{i}].models[{j}]: no model alias {a!r}; known: "
                           f"{sorted(aliases)}")
    for a in cfg.routing.models:
        if a not in aliases:
            out.append(f"routing.models.{a}: no model alias {a!r}")
    for i, rule in enumerate(cfg.model_map):
        if rule.alias not in aliases:
            out.append(f"model_map[{i}].alias: no model alias {rule.alias!r}; known: "
                       f"{sorted(aliases)}")
    for a, split in cfg.routing.splits.items():
        if a not in aliases:
            out.append(f"routing.splits.{a}: no model alias {a!r}")
            continue
        for v in split.weights:
            if v not in versions[a]:
                out.append(f"routing.splits.{a}.weights.{v}: no backend of {a!r} has "
                           f"model_version {v!r}; known: {sorted(versions[a])}")
        for field, table in (("header_versions", split.header_versions),
                             ("tenant_versions", split.tenant_versions)):
            for k, v in table.items():
                if v not in versions[a]:
                    out.append(f"routing.splits.{a}.{field}.{k}: no backend of {a!r} has "
                               f"model_version {v!r}")
    return out


def _read(path: str | Path | None) -> Any:
    if path is None:
        return default_config_dict()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"(file): cannot read {path}: {exc.strerror}"]) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"(file): not valid YAML: {exc}"]) from None


def _environment(cfg: GatewayConfig) -> list[str]:
    """Apply the environment's overrides to ``cfg``; the errors of their URLs."""
    env = os.environ
    if env.get("TOKENPLANE_DATABASE_URL"):
        cfg.database_url = env["TOKENPLANE_DATABASE_URL"]
    if env.get("TOKENPLANE_REDIS_URL"):
        cfg.redis_url = env["TOKENPLANE_REDIS_URL"]
    bad = store_url_errors(env.get("TOKENPLANE_DATABASE_URL") or None, None,
                           "$TOKENPLANE_DATABASE_URL")
    bad += store_url_errors(None, env.get("TOKENPLANE_REDIS_URL") or None,
                            "$TOKENPLANE_REDIS_URL")
    if cfg.data_dir is None:
        cfg.data_dir = env.get("TOKENPLANE_HOME", ".tokenplane")
    return bad


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> GatewayConfig:
    """Load ``path`` (YAML) or the embedded default; ``overrides`` (``serve --set
    key=value``, :mod:`compose.overrides`) apply to its data before validation, the
    environment's after, to both."""
    data = _read(path)
    if overrides:
        try:
            data = apply_overrides(data, overrides)
        except OverrideError as exc:
            raise ConfigError([str(exc)]) from None
    cfg = validate_config(data)
    bad = _environment(cfg)
    if bad:
        raise ConfigError(bad)
    return cfg


def check_config(path: str | Path) -> tuple[GatewayConfig | None, list[str]]:
    """``config check``'s pass: every error :func:`check_data` finds, and those of the
    environment's overrides, in one run (a file that cannot be read or parsed: that
    alone)."""
    try:
        data = _read(path)
    except ConfigError as exc:
        return None, exc.errors
    cfg, errors = check_data(data)
    if cfg is not None:
        errors = errors + _environment(cfg)
    return cfg, errors
