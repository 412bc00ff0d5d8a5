"""Plugs the governance guards and the audit finisher into a built pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenplane.config.governance_schema import GovernanceConfig
from tokenplane.governance.audit.service import AuditService, audit_redactor
from tokenplane.governance.guard_policy import GuardPolicies
from tokenplane.pipeline.admission_stage import AdmissionFinisher
from tokenplane.pipeline.audit_stage import AuditFinisher
from tokenplane.pipeline.guard_stages import ContextPolicyStage, InputGuardStage
from tokenplane.pipeline.output_guard import GuardedCall
from tokenplane.pipeline.runner import Pipeline
from tokenplane.pipeline.stages import TokensStage, ValidateStage


@dataclass
class Governance:
    policies: GuardPolicies
    audit: AuditService | None


def install_governance(pipeline: Pipeline, config: GovernanceConfig, home: Path,
                       worker_id: str | None) -> Governance | None:
    """Input guard after validation (so counts see what is sent), the context cap after
    counting, the output guard around the upstream call, the audit finisher.
    Returns None (and changes nothing) when governance is disabled."""
    if not config.enabled:
        return None
    policies = GuardPolicies(config)
    stages = pipeline.stages
    at = next(i for i, s in enumerate(stages) if isinstance(s, ValidateStage))
    stages.insert(at + 1, InputGuardStage(policies))
    at = next(i for i, s in enumerate(stages) if isinstance(s, TokensStage))
    stages.insert(at + 1, ContextPolicyStage())
    pipeline.call = GuardedCall(pipeline.call.max_attempts)
    audit = None
    if config.audit.enabled:
        audit = AuditService.open(home, worker_id, config.audit,
                                  audit_redactor(policies.analyzer))
        # before the admission finisher, which settles and removes the ticket whose
        # limits the record lists
        fins = pipeline.finishers
        at = next((i for i, f in enumerate(fins) if isinstance(f, AdmissionFinisher)), len(fins))
        fins.insert(at, AuditFinisher(audit, policies))
    return Governance(policies, audit)
