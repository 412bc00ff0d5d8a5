"""Load a config from YAML (or the embedded default) and report errors with paths.

The schema (``tokenplane.config``) checks shapes and values; what only the policy code
knows (routing profile and plugin names) is checked here, above both, so the schema
imports nothing of tokenplane."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

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
        if isinstance(part, int):
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


def validate_config(data: Any) -> GatewayConfig:
    if not isinstance(data, dict):
        raise ConfigError(["(root): the config must be a mapping"])
    try:
        cfg = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
            lines.append(f"{_path(loc)}: {_message(dict(err))}")
        raise ConfigError(lines) from None
    lines = _policy_errors(cfg)
    if lines:
        raise ConfigError(lines)
    return cfg


def _policy_errors(cfg: GatewayConfig) -> list[str]:
    """Routing profiles that name no profile of the table or an unknown plugin."""
    out = []
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


def load_config(path: str | Path | None) -> GatewayConfig:
    """Load ``path`` (YAML) or the embedded default; env overrides apply to both."""
    if path is None:
        data: Any = default_config_dict()
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError([f"(file): cannot read {path}: {exc.strerror}"]) from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError([f"(file): not valid YAML: {exc}"]) from None
    cfg = validate_config(data)
    env = os.environ
    if env.get("TOKENPLANE_DATABASE_URL"):
        cfg.database_url = env["TOKENPLANE_DATABASE_URL"]
    if env.get("TOKENPLANE_REDIS_URL"):
        cfg.redis_url = env["TOKENPLANE_REDIS_URL"]
    if cfg.data_dir is None:
        cfg.data_dir = env.get("TOKENPLANE_HOME", ".tokenplane")
    return cfg
