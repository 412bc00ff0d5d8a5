"""Config section ``slos:``: service-level objectives with error budgets and burn-rate
alerts (docs/SLO.md). The schema only: ``tokenplane.slo.spec`` turns it into the
policy's objects."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tokenplane.config.validators import env_name, http_url

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")


def parse_duration(value: str | float | int) -> float:
    """Seconds from ``"30d"``, ``"5m"``, ``"250ms"`` or a bare number of seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string such as '5m'")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(value)
        if match is None:
            raise ValueError(f"{value!r} is not a duration (e.g. 250ms, 30s, 5m, 1h, 30d)")
        seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError("a duration must be positive and finite")
    return seconds


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SloSelectorConfig(_Strict):
    """Which requests an SLO covers; every field set must match (unset: any)."""

    model: str | None = None
    tenant: str | None = None
    department: str | None = None
    app: str | None = None
    slo_class: str | None = None


SliKindName = Literal["ttft", "tpot", "latency", "availability"]


class SliConfig(_Strict):
    """One SLI: ``ttft`` / ``tpot`` / ``latency`` under ``threshold``, or ``availability``."""

    kind: SliKindName
    threshold: float | None = None  # seconds; "1s" and "200ms" are accepted

    @field_validator("threshold", mode="before")
    @classmethod
    def _threshold(cls, v: object) -> float | None:
        if v is None:
            return None
        if not isinstance(v, str | int | float):
            raise ValueError("a threshold is a number of seconds or a string such as '1s'")
        return parse_duration(v)

    @model_validator(mode="after")
    def _needs_threshold(self) -> SliConfig:
        if self.kind == "availability" and self.threshold is not None:
            raise ValueError("availability takes no threshold")
        if self.kind != "availability" and self.threshold is None:
            raise ValueError(f"a {self.kind} SLI needs a threshold (e.g. '1s')")
        return self


class BurnAlertConfig(_Strict):
    """Fire when the burn rate is above ``burn_rate`` over both windows."""

    severity: Literal["page", "ticket"]
    burn_rate: float = Field(gt=0)
    long_window: float
    short_window: float

    @field_validator("long_window", "short_window", mode="before")
    @classmethod
    def _window(cls, v: object) -> float:
        if not isinstance(v, str | int | float):
            raise ValueError("a window is a number of seconds or a string such as '1h'")
        return parse_duration(v)

    @model_validator(mode="after")
    def _short_below_long(self) -> BurnAlertConfig:
        if self.short_window >= self.long_window:
            raise ValueError("short_window must be shorter than long_window")
        return self


class SloProtectConfig(_Strict):
    """Admission that protects this SLO's budget (docs/SLO.md): while it burns faster
    than ``burn_rate`` over ``window``, the sheddable ``classes`` (default: every
    sheddable class) get ``gate_fraction`` of each replica and are shed after
    ``max_wait``, until the burn is back at or under ``release_burn_rate``."""

    burn_rate: float = Field(2.0, gt=0)
    release_burn_rate: float = Field(1.0, ge=0)
    window: float = 300.0
    classes: list[str] = Field(default_factory=list)
    gate_fraction: float = Field(0.1, gt=0, le=1)
    max_wait: float = 1.0

    @field_validator("window", "max_wait", mode="before")
    @classmethod
    def _durations(cls, v: object) -> float:
        if not isinstance(v, str | int | float):
            raise ValueError("a duration is a number of seconds or a string such as '5m'")
        return parse_duration(v)

    @model_validator(mode="after")
    def _hysteresis(self) -> SloProtectConfig:
        if self.release_burn_rate > self.burn_rate:
            raise ValueError("release_burn_rate must not exceed burn_rate")
        return self


class SloConfig(_Strict):
    """One objective: ``objective`` of the valid events of each SLI are good over a
    rolling ``window``. ``alerts`` unset: the SRE workbook's multi-window,
    multi-burn-rate policy for that window."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    selector: SloSelectorConfig = Field(default_factory=lambda: SloSelectorConfig())
    slis: list[SliConfig] = Field(min_length=1)
    objective: float = Field(gt=0, lt=1)
    window: float = 30 * 86400.0
    alerts: list[BurnAlertConfig] | None = None
    protect: SloProtectConfig | None = None  # off unless set

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, v: object) -> float:
        if not isinstance(v, str | int | float):
            raise ValueError("a window is a number of seconds or a string such as '30d'")
        return parse_duration(v)

    @field_validator("slis")
    @classmethod
    def _one_per_kind(cls, v: list[SliConfig]) -> list[SliConfig]:
        kinds = [s.kind for s in v]
        if len(set(kinds)) != len(kinds):
            raise ValueError("each SLI kind may appear once in an SLO")
        return v

    @model_validator(mode="after")
    def _alerts_fit_window(self) -> SloConfig:
        for k, rule in enumerate(self.alerts or []):
            if rule.long_window > self.window:
                raise ValueError(
                    f"alerts[{k}].long_window: longer than the SLO's window"
                )
            if rule.burn_rate * (1 - self.objective) > 1:
                raise ValueError(
                    f"alerts[{k}].burn_rate: {rule.burn_rate} can never be reached with "
                    f"objective "
                    f"{self.objective} (the most is {1 / (1 - self.objective):.4g})"
                )
        return self


Severity = Literal["page", "ticket"]


def _both_severities() -> list[Severity]:
    return ["page", "ticket"]


class SloWebhookConfig(_Strict):
    """Where firing and resolved SLO alerts are POSTed. ``format``: ``alertmanager``
    (the JSON Alertmanager sends its webhook receivers) or ``text`` (``{"text": ...}``
    plus the alert's fields, which chat tools' incoming webhooks accept)."""

    url: str
    format: Literal["alertmanager", "text"] = "alertmanager"
    severities: list[Severity] = Field(default_factory=_both_severities, min_length=1)
    # header name -> the environment variable holding its value (never the secret)
    headers_env: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        checked = http_url(v)
        assert checked is not None
        return checked

    @field_validator("headers_env")
    @classmethod
    def _envs(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v.values():
            env_name(name)
        return v


class SloAlertingConfig(_Strict):
    """How SLO alerts leave the gateway: evaluated every ``evaluate_every`` by one
    leader among the workers and replicas; each webhook post retried with exponential
    backoff from ``retry_initial`` up to ``retry_max`` apart, ``max_attempts`` in all."""

    webhooks: list[SloWebhookConfig] = Field(default_factory=list)
    evaluate_every: float = 10.0
    retry_initial: float = 1.0
    retry_max: float = 60.0
    max_attempts: int = Field(8, ge=1, le=100)
    timeout: float = 5.0

    @field_validator("evaluate_every", "retry_initial", "retry_max", "timeout",
                     mode="before")
    @classmethod
    def _durations(cls, v: object) -> float:
        if not isinstance(v, str | int | float):
            raise ValueError("a duration is a number of seconds or a string such as '10s'")
        return parse_duration(v)
