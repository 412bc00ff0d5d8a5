"""Config section for agent sessions (docs/SESSIONS.md): per-session budgets and the
tool-output growth policy, with per-tenant / per-app overrides."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# the longest a session budget's horizon may be: the sliding window of admission
MAX_SESSION_WINDOW_S = 31 * 86_400


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionBudgetConfig(_Strict):
    """A cap per session: total tokens (prompt + output) and / or money (in the prices'
    currency). Reserved step by step by admission; a step that would go over gets a
    429 ``session_budget_exceeded`` naming the session. Unset: no cap."""

    max_tokens: int | None = Field(None, ge=1)
    max_cost: Decimal | None = Field(None, gt=0)

    @field_validator("max_cost")
    @classmethod
    def _micros(cls, v: Decimal | None) -> Decimal | None:
        if v is not None and v.scaleb(6) != v.scaleb(6).to_integral_value():
            raise ValueError("max_cost has at most 6 decimal places (micro-units)")
        return v


class ToolOutputConfig(_Strict):
    """When a tool result is large or the context grows fast: ``max_result_tokens``
    (one tool-role message's content, in the model's tokens) and
    ``max_growth_tokens`` (the tokens a step adds after the previous step's answer:
    the messages after the last assistant message). Over either, the request is
    flagged (ledger, ``x-tokenplane-tool-output`` header, metric); ``action`` may also
    shrink the results: ``truncate`` keeps the head and tail of each result over the
    size with ``marker`` between them; ``keep_fields`` keeps only ``fields`` of a JSON
    result (then truncates what is still over). On growth over the rate, the new
    results share ``max_growth_tokens`` equally."""

    max_result_tokens: int | None = Field(None, ge=16)
    max_growth_tokens: int | None = Field(None, ge=16)
    action: Literal["flag", "truncate", "keep_fields"] = "flag"
    head_share: float = Field(0.5, ge=0, le=1)
    fields: list[str] = Field(default_factory=list)
    marker: str = Field("\n[... {dropped} tokens of tool output removed by tokenplane ...]\n",
                        max_length=200)

    @model_validator(mode="after")
    def _fields_for_keep(self) -> ToolOutputConfig:
        if self.action == "keep_fields" and not self.fields:
            raise ValueError("action keep_fields needs the fields to keep")
        return self


class SessionOverride(_Strict):
    """Settings for one tenant (``app`` unset) or one app of a tenant; what it sets
    replaces the defaults (an app's override wins over its tenant's)."""

    tenant: str = Field(min_length=1)
    app: str | None = None
    budget: SessionBudgetConfig | None = None
    tool_output: ToolOutputConfig | None = None


class SessionsConfig(_Strict):
    """Agent sessions: a request names its session with ``x-tokenplane-session`` (or
    ``metadata.tokenplane_session``); the ledger keeps each step. ``window_s``: how
    long a session's spending counts against its budget (the admission window; a
    session active for longer regains what it spent before that) and how long its
    step counter lives."""

    enabled: bool = True
    window_s: float = Field(86_400.0, ge=60, le=MAX_SESSION_WINDOW_S)
    budget: SessionBudgetConfig = Field(
        default_factory=lambda: SessionBudgetConfig())  # type: ignore[call-arg]
    tool_output: ToolOutputConfig = Field(
        default_factory=lambda: ToolOutputConfig())  # type: ignore[call-arg]
    overrides: list[SessionOverride] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_overrides(self) -> SessionsConfig:
        seen: set[tuple[str, str | None]] = set()
        for i, o in enumerate(self.overrides):
            key = (o.tenant, o.app)
            if key in seen:
                raise ValueError(f"overrides[{i}]: a second override for tenant {o.tenant!r}"
                                 + (f" app {o.app!r}" if o.app else ""))
            seen.add(key)
        return self
