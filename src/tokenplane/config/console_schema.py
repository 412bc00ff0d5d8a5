"""Config section ``console:``: the web console at ``/console`` (docs/CONSOLE.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tokenplane.config.validators import env_name, http_url


class OidcConfig(BaseModel):
    """Single sign-on for the console with OpenID Connect (authorization code flow with
    PKCE, docs/CONSOLE.md): the provider at ``issuer`` (its discovery document),
    this console's ``client_id`` and, for a confidential client, the variable holding
    its secret (``client_secret_env``; sent with HTTP Basic). The ID token's
    ``tenant_claim`` names the tenant (must exist; an operator needs none),
    ``role_claim`` the role (``default_role`` when absent), ``department_claim``
    optionally binds to a department. ``redirect_uri``: the callback as the provider
    knows it (default: this request's host, ``/console/oidc/callback``)."""

    model_config = ConfigDict(extra="forbid")

    issuer: str
    client_id: str = Field(min_length=1)
    client_secret_env: str | None = None
    redirect_uri: str | None = None
    scopes: list[str] = Field(default_factory=lambda: ["openid"])
    tenant_claim: str = Field("tokenplane_tenant", min_length=1)
    role_claim: str = Field("tokenplane_role", min_length=1)
    department_claim: str | None = None
    default_role: Literal["operator", "tenant-admin", "viewer", "auditor"] = "viewer"

    @field_validator("issuer", "redirect_uri")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return http_url(v)

    @field_validator("client_secret_env")
    @classmethod
    def _secret(cls, v: str | None) -> str | None:
        return env_name(v)

    @field_validator("scopes")
    @classmethod
    def _openid(cls, v: list[str]) -> list[str]:
        if "openid" not in v:
            raise ValueError("must include 'openid'")
        return v


class ConsoleConfig(BaseModel):
    """The web console (on by default). Sign-in takes an API key and gives a signed,
    encrypted, expiring session cookie; ``secret_env`` names the variable holding the
    cookie secret (unset: a secret kept in ``<data_dir>/console.secret``, which every
    worker of ``serve --workers N`` shares). ``secure_cookie``: ``auto`` marks the
    cookie ``Secure`` when the request came over HTTPS (``X-Forwarded-Proto: https``
    from a proxy in front counts), ``always`` / ``never`` decide it outright.
    ``language``: the language when neither the switch nor the browser picks one."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    session_ttl_s: int = Field(default=8 * 3600, ge=60, le=30 * 86400)
    secure_cookie: Literal["auto", "always", "never"] = "auto"
    secret_env: str | None = None
    language: Literal["en", "zh-CN"] = "en"
    # the rows each page shows at most (tables and top lists)
    max_rows: int = Field(default=200, ge=10, le=10_000)
    oidc: OidcConfig | None = None  # single sign-on besides API keys (None: keys only)

    @field_validator("secret_env")
    @classmethod
    def _secret_env(cls, v: str | None) -> str | None:
        return env_name(v)
