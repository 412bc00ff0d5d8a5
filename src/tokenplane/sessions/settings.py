"""The session settings that apply to one tenant's app: the defaults of the
``sessions`` config section, replaced by the tenant's override, replaced by the app's."""

from __future__ import annotations

from dataclasses import dataclass

from tokenplane.config.sessions_schema import (
    SessionBudgetConfig,
    SessionsConfig,
    ToolOutputConfig,
)


@dataclass(frozen=True, slots=True)
class SessionSettings:
    budget: SessionBudgetConfig
    tool_output: ToolOutputConfig
    window_s: float


class SessionSettingsBook:
    """Resolves (and caches) the settings of each (tenant, app)."""

    def __init__(self, cfg: SessionsConfig) -> None:
        self.cfg = cfg
        self._overrides = {(o.tenant, o.app): o for o in cfg.overrides}
        self._cache: dict[tuple[str, str], SessionSettings] = {}

    def for_app(self, tenant: str, app: str | None) -> SessionSettings:
        key = (tenant, app or "")
        got = self._cache.get(key)
        if got is not None:
            return got
        budget, tool = self.cfg.budget, self.cfg.tool_output
        for o in (self._overrides.get((tenant, None)),
                  self._overrides.get((tenant, app)) if app else None):
            if o is None:
                continue
            budget = o.budget if o.budget is not None else budget
            tool = o.tool_output if o.tool_output is not None else tool
        got = SessionSettings(budget, tool, self.cfg.window_s)
        if len(self._cache) >= 10_000:
            self._cache.clear()
        self._cache[key] = got
        return got
