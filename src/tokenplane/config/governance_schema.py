"""The ``governance:`` configuration section: PII actions, injection screen, tool
permissions, token caps and the audit log, with per-tenant / per-app overrides.

See docs/GOVERNANCE.md ("Gateway configuration") for the defaults and their reasons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from tokenplane.config.validators import env_name

PiiActionName = Literal["allow", "log", "mask", "tokenize", "block"]
InjectionMode = Literal["none", "log", "flag", "block"]
DocumentMode = Literal["none", "log", "flag", "drop", "block"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PiiRules(_Strict):
    """What to do with each entity type in one kind of text."""

    default: PiiActionName = "log"
    actions: dict[str, PiiActionName] = Field(default_factory=dict)

    def needs_scan(self) -> bool:
        return self.default != "allow" or any(a != "allow" for a in self.actions.values())

    def rewrites(self) -> bool:
        """True when text may change or be refused (anything beyond allow / log)."""
        acts = {self.default, *self.actions.values()}
        return bool(acts - {"allow", "log"})


def _response_rules() -> PiiRules:
    return PiiRules(default="allow")


class PiiRulesOverride(_Strict):
    """Per tenant / app: each kind of text given here replaces the inherited rules."""

    prompt: PiiRules | None = None
    tool_results: PiiRules | None = None
    response: PiiRules | None = None

    @field_validator("response")
    @classmethod
    def _no_tokenize(cls, v: PiiRules | None) -> PiiRules | None:
        return _check_response(v)


def _check_response(v: PiiRules | None) -> PiiRules | None:
    if v is not None and "tokenize" in {v.default, *v.actions.values()}:
        raise ValueError("responses cannot be tokenized (the client could not restore "
                         "them); use mask or block")
    return v


class PiiConfig(_Strict):
    """``analyzer``: recognizer options (``builtin``, ``custom``, ``min_score``,
    ``entities``, ``presidio``; see governance/analyzer.py). ``prompt`` covers
    user / system / assistant messages and completion prompts, ``tool_results``
    messages of role ``tool`` (the prompt rules when unset), ``response`` what the
    model writes."""

    analyzer: dict[str, Any] = Field(default_factory=dict)
    prompt: PiiRules = Field(default_factory=lambda: PiiRules())
    tool_results: PiiRules | None = None
    response: PiiRules = Field(default_factory=_response_rules)

    @field_validator("response")
    @classmethod
    def _no_tokenize(cls, v: PiiRules) -> PiiRules:
        _check_response(v)
        return v


class InjectionConfig(_Strict):
    """Prompt-injection screen of the new user turn and the tool results after it
    (``mode``), and of each RAG document (``documents``: none, log, flag (kept, the
    request flagged), drop (left out before packing, reason ``injection``) or block
    (dropped from ``flag_at``, the request refused from ``block_at``); unset: the
    same word as ``mode``; drop and block screen every document offered, log and
    flag the ones packed). The thresholds are shared."""

    mode: InjectionMode = "flag"
    log_at: float = Field(0.3, ge=0, le=1)
    flag_at: float = Field(0.5, ge=0, le=1)
    block_at: float = Field(0.8, ge=0, le=1)
    documents: DocumentMode | None = None

    @model_validator(mode="after")
    def _ordered(self) -> InjectionConfig:
        if not self.log_at <= self.flag_at <= self.block_at:
            raise ValueError("thresholds must satisfy log_at <= flag_at <= block_at")
        return self


class ToolsConfig(_Strict):
    """``allowed`` None: every tool; otherwise only these function names."""

    allowed: list[str] | None = None
    mode: Literal["reject", "strip"] = "reject"


class AuditConfig(_Strict):
    """The tamper-evident audit log under ``<data_dir>/audit/<worker>/``.

    The signing secret (>= 16 bytes) comes from ``key_file`` (a path outside the data
    directory), else from the variable ``key_env`` names; with neither, a key is
    generated into ``<data_dir>/audit.key`` (mode 0600), which proves integrity but not
    authenticity (whoever can edit the log can read it): the gateway warns at start and
    ``audit verify`` says so. ``full`` retention encrypts content with the key in
    ``encryption_key_env`` (required then). Keys are never written in the config.
    A signed checkpoint follows every ``checkpoint_every`` records, and comes at the
    first flush once ``checkpoint_interval_s`` has passed since the last one (when
    records were added since): verify names a changed record within that window.
    """

    enabled: bool = True
    retention: Literal["none", "redacted", "full"] = "redacted"
    encryption_key_env: str | None = None
    key_env: str = Field("TOKENPLANE_AUDIT_KEY",
                         validation_alias=AliasChoices("key_env", "hmac_key_env"))
    key_file: str | None = None
    retention_days: float = Field(180.0, ge=0)  # 0 keeps records forever
    checkpoint_every: int = Field(100, ge=1, le=10_000)
    checkpoint_interval_s: float = Field(5.0, gt=0, le=3600)
    flush_interval_s: float = Field(0.2, gt=0)
    fsync: bool = False

    @field_validator("encryption_key_env")
    @classmethod
    def _enc_env(cls, v: str | None) -> str | None:
        return env_name(v)

    @field_validator("key_env")
    @classmethod
    def _key_env(cls, v: str) -> str:
        env_name(v)
        return v

    @field_validator("key_file")
    @classmethod
    def _key_file(cls, v: str | None) -> str | None:
        if v is not None and not Path(v).expanduser().is_absolute():
            raise ValueError("must be an absolute path (a file outside the data directory "
                             "holding the audit signing key)")
        return v

    @model_validator(mode="after")
    def _full_needs_key(self) -> AuditConfig:
        if self.retention == "full" and not self.encryption_key_env:
            raise ValueError("retention 'full' needs encryption_key_env (the name of the "
                             "environment variable holding the content key)")
        return self


class PolicyOverride(_Strict):
    """Overrides for one tenant, or one app of a tenant (applied after the tenant's).
    A section given here replaces the inherited one; unset fields inherit."""

    tenant: str = Field(min_length=1)
    app: str | None = None
    models: list[str] | None = None
    pii: PiiRulesOverride | None = None
    injection: InjectionConfig | None = None
    tools: ToolsConfig | None = None
    max_context_tokens: int | None = Field(None, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)


class GovernanceConfig(_Strict):
    enabled: bool = True
    pii: PiiConfig = Field(default_factory=lambda: PiiConfig())
    injection: InjectionConfig = Field(default_factory=lambda: InjectionConfig())  # type: ignore[call-arg]
    tools: ToolsConfig = Field(default_factory=lambda: ToolsConfig())
    max_context_tokens: int | None = Field(None, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)
    audit: AuditConfig = Field(default_factory=lambda: AuditConfig())  # type: ignore[call-arg]
    overrides: list[PolicyOverride] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_overrides(self) -> GovernanceConfig:
        seen: set[tuple[str, str | None]] = set()
        for o in self.overrides:
            if (o.tenant, o.app) in seen:
                raise ValueError(f"duplicate override for tenant={o.tenant!r} app={o.app!r}")
            seen.add((o.tenant, o.app))
        return self
