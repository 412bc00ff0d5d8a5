"""The ``context:`` section and a model's ``overflow:`` policy (docs/CONTEXT.md): RAG
context packing limits, and what to do with a prompt over the model's window."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

OnOverflow = Literal["reject", "trim_history", "fallback"]
Placement = Literal["system", "user"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OverflowConfig(_Strict):
    """A prompt that, with its output reservation, does not fit the model's window:
    ``reject`` (400 ``context_length_exceeded``, the default), ``trim_history`` (drop
    the oldest turns, keeping the system prompt, pinned messages and the current turn,
    tool calls with their results, exactly to the window less the reservation) or
    ``fallback`` (serve it on the alias ``fallback``, whose window is larger). The
    reservation is the request's ``max_tokens`` (``max_completion_tokens``), else
    ``reserve_output_tokens``."""

    on_overflow: OnOverflow = "reject"
    fallback: str | None = None
    reserve_output_tokens: int = Field(1024, ge=1)

    @model_validator(mode="after")
    def _fallback_named(self) -> OverflowConfig:
        if self.on_overflow == "fallback" and not self.fallback:
            raise ValueError("on_overflow 'fallback' needs 'fallback': the alias to move to")
        return self


class AppOverflowConfig(_Strict):
    """The overflow policy of one tenant, or one app of a tenant (over the model's);
    ``fallback`` moves to the model's own ``overflow.fallback`` (a model without one
    rejects)."""

    tenant: str = Field(min_length=1)
    app: str | None = None
    on_overflow: OnOverflow
    reserve_output_tokens: int | None = Field(None, ge=1)


class ContextConfig(_Strict):
    """RAG context packing (the ``tokenplane.context`` object of a chat request):
    at most ``max_documents`` documents of at most ``max_characters`` characters in
    all (also the bound of ``POST /v1/context/pack``); with no budget in the request, at most
    ``default_budget_share`` of the model's window (never more than the window less
    the rest of the prompt and the output reservation); the packed documents go in a
    message of their own, a ``system`` one after the system prompt or a ``user`` one
    before the current turn (``placement``, also a per-request option). ``apps``:
    overflow policies per tenant or app."""

    max_documents: int = Field(256, ge=1, le=10_000)
    max_characters: int = Field(2_000_000, ge=1, le=100_000_000)
    default_budget_share: float = Field(0.5, gt=0, le=1)
    placement: Placement = "system"
    apps: list[AppOverflowConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_apps(self) -> ContextConfig:
        seen: set[tuple[str, str | None]] = set()
        for a in self.apps:
            if (a.tenant, a.app) in seen:
                raise ValueError(f"duplicate overflow policy for tenant={a.tenant!r} "
                                 f"app={a.app!r}")
            seen.add((a.tenant, a.app))
        return self
