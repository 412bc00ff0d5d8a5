"""Who a limit applies to: scopes of the principal hierarchy, optionally per model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

# "session": an agent session's budget (sessions/budget.py; its rules come from the
# sessions config, not from the limit table)
ScopeKind = Literal["tenant", "department", "app", "key", "user", "session"]
SCOPE_KINDS: tuple[ScopeKind, ...] = ("tenant", "department", "app", "key", "user", "session")


@dataclass(frozen=True, slots=True)
class Scope:
    """One node of the hierarchy tenant -> department -> app -> key, or an end user.

    ``id`` is unique within its tenant (the stores namespace every key by tenant).
    ``model`` set means the limit applies to that model alias only; ``None`` means
    all models.
    """

    kind: ScopeKind
    id: str
    model: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in SCOPE_KINDS:
            raise ValueError(f"scope kind must be one of {SCOPE_KINDS}, got {self.kind!r}")
        if not self.id:
            raise ValueError(f"scope {self.kind!r} needs a non-empty id")

    @property
    def label(self) -> str:
        """Stable text form, used in store keys and in error messages."""
        base = f"{self.kind}:{self.id}"
        return base if self.model is None else f"{base}@{self.model}"

    def for_model(self, model: str | None) -> Scope:
        return Scope(self.kind, self.id, model)


@dataclass(frozen=True, slots=True)
class Parties:
    """The parties a request acts for; only ``tenant`` is required."""

    tenant: str
    department: str | None = None
    app: str | None = None
    key: str | None = None
    user: str | None = None

    def scope_chain(self, model: str | None = None) -> list[Scope]:
        """Every scope the request must satisfy, broadest first.

        Each level appears for all models and, when ``model`` is given, for that
        model alias as well.
        """
        levels: list[tuple[ScopeKind, str | None]] = [
            ("tenant", self.tenant),
            ("department", self.department),
            ("app", self.app),
            ("key", self.key),
            ("user", self.user),
        ]
        chain: list[Scope] = []
        for kind, ident in levels:
            if ident is None:
                continue
            chain.append(Scope(kind, ident))
            if model is not None:
                chain.append(Scope(kind, ident, model))
        return chain


def tenant_of(scopes: Sequence[Scope]) -> str:
    """The tenant id of a scope chain; every chain must name its tenant."""
    for scope in scopes:
        if scope.kind == "tenant":
            return scope.id
    raise ValueError("a scope chain must contain its tenant scope")


def admission_parties(tenant: str, department: str | None = None, app: str | None = None,
                        key_id: str | None = None, user: str | None = None) -> Parties:
    """The admission principal of a caller, with tenant-qualified scope ids."""
    return Parties(
        tenant=tenant,
        department=f"{tenant}/{department}" if department else None,
        app=f"{tenant}/{department or ''}/{app}" if app else None,
        key=key_id or None,
        user=f"{tenant}/{user}" if user else None,
    )
