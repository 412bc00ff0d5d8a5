"""One administrative action (who changed which tenant, key, limit, budget or cache)
as a record of the tamper-evident audit log: ``kind: admin``, beside the requests'
``kind: request`` records, in the same hash chain."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenplane.governance.audit.entry import AuditEntry


@dataclass
class AdminAction(AuditEntry):
    """``action``: the method and route (``PUT /admin/v1/limits``); ``params``: the
    path parameters, query and JSON body as sent (never a key: bodies that create one
    carry none, the answer that shows it is not recorded); ``role``: the caller's."""

    action: str = ""
    role: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def to_fields(self) -> dict[str, Any]:
        return {"kind": "admin", "request_id": self.request_id, "tenant": self.tenant,
                "key_id": self.key_id, "principal": self.principal, "app": self.app,
                "model": None, "role": self.role,
                "action": self.action, "params": self.params, "status": self.status,
                "verdict": self.verdict}
