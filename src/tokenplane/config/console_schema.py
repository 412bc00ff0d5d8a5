"""Config section ``console:``: the web console at ``/console`` (docs/CONSOLE.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tokenplane.config.validators import env_name


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

    @field_validator("secret_env")
    @classmethod
    def _secret_env(cls, v: str | None) -> str | None:
        return env_name(v)
