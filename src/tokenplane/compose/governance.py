"""Governance for one gateway worker: the guard policies and the audit service."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenplane.config.governance_schema import GovernanceConfig
from tokenplane.governance.audit.service import AuditService, audit_redactor
from tokenplane.governance.guard_policy import GuardPolicies


@dataclass
class Governance:
    policies: GuardPolicies
    audit: AuditService | None


def open_governance(config: GovernanceConfig, home: Path,
                    worker_id: str | None) -> Governance | None:
    """The guard policies and (when the audit log is on) the audit service; None when
    governance is disabled."""
    if not config.enabled:
        return None
    policies = GuardPolicies(config)
    audit = None
    if config.audit.enabled:
        audit = AuditService.open(home, worker_id, config.audit,
                                  audit_redactor(policies.analyzer))
    return Governance(policies, audit)
