"""Who is calling: the principal an API key resolves to."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Principal:
    key_id: str
    tenant: str
    department: str | None = None
    app: str | None = None
    admin: bool = False
    end_user: str | None = None
    role: str | None = None  # auth/roles.py; ``admin`` keys are operators whatever it says

    def with_end_user(self, user: str | None) -> Principal:
        if user is None:
            return self
        return Principal(self.key_id, self.tenant, self.department, self.app, self.admin, user,
                         self.role)
