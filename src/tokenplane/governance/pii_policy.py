"""What to do with each entity type found: allow, log, mask, tokenize or block."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.errors import PolicyViolation
from tokenplane.governance.masking import mask_value
from tokenplane.governance.vault import Vault


class PiiAction(StrEnum):
    ALLOW = "allow"  # not reported
    LOG = "log"  # reported in findings, text unchanged
    MASK = "mask"  # irreversible, shape kept
    TOKENIZE = "tokenize"  # reversible placeholder in the request's vault
    BLOCK = "block"  # the whole request is refused


@dataclass(frozen=True, slots=True)
class Finding:
    """One entity found and what was done to it (never the value)."""

    entity_type: str
    start: int
    end: int
    score: float
    recognizer: str
    action: PiiAction


class PiiBlocked(PolicyViolation):
    """A 400 naming the entity types that a policy blocks (never the values)."""

    def __init__(self, entity_types: list[str]) -> None:
        self.entity_types = sorted(set(entity_types))
        super().__init__(
            400,
            "request blocked by data protection policy: it contains "
            + ", ".join(self.entity_types),
            code="pii_blocked",
        )


@dataclass
class PiiPolicy:
    """Actions per entity type, with a default for every other recognised type."""

    actions: dict[str, PiiAction] = field(default_factory=dict)
    default: PiiAction = PiiAction.MASK
    analyzer: Analyzer = field(default_factory=Analyzer)

    def __post_init__(self) -> None:
        # Accept plain strings from configuration ("mask", "block", ...).
        self.actions = {k: PiiAction(v) for k, v in self.actions.items()}
        self.default = PiiAction(self.default)

    def action_for(self, entity_type: str) -> PiiAction:
        return self.actions.get(entity_type, self.default)

    @property
    def rewrites(self) -> bool:
        """True when the policy may change a text (some type is masked or tokenized)."""
        return bool({self.default, *self.actions.values()} & {PiiAction.MASK, PiiAction.TOKENIZE})

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], analyzer: Analyzer | None = None) -> PiiPolicy:
        """``{"default": "mask", "actions": {"CN_ID_CARD": "tokenize"}, "analyzer": {...}}``."""
        try:
            actions = {str(k): PiiAction(v) for k, v in (spec.get("actions") or {}).items()}
            default = PiiAction(spec.get("default", PiiAction.MASK))
        except ValueError as exc:
            raise ValueError(f"bad PII action: {exc}") from exc
        if analyzer is None:
            analyzer = Analyzer.from_config(spec.get("analyzer") or {})
        return cls(actions=actions, default=default, analyzer=analyzer)


def scan(text: str, policy: PiiPolicy) -> list[Finding]:
    """Findings with the action the policy assigns; ALLOW-ed types left out."""
    findings: list[Finding] = []
    for span in policy.analyzer.analyze(text):
        action = policy.action_for(span.entity_type)
        if action is not PiiAction.ALLOW:
            findings.append(
                Finding(span.entity_type, span.start, span.end, span.score, span.recognizer, action)
            )
    return findings


def apply(text: str, policy: PiiPolicy, vault: Vault) -> tuple[str, list[Finding]]:
    """Apply the policy to one text. Raises PiiBlocked if any finding is blocked."""
    findings = scan(text, policy)
    blocked = [f.entity_type for f in findings if f.action is PiiAction.BLOCK]
    if blocked:
        raise PiiBlocked(blocked)
    if not any(f.action in (PiiAction.MASK, PiiAction.TOKENIZE) for f in findings):
        return text, findings
    out: list[str] = []
    pos = 0
    for f in findings:
        if f.action is PiiAction.LOG:
            continue
        value = text[f.start : f.end]
        out.append(text[pos : f.start])
        if f.action is PiiAction.MASK:
            out.append(mask_value(value, f.entity_type))
        else:
            out.append(vault.tokenize(value, f.entity_type))
        pos = f.end
    out.append(text[pos:])
    return "".join(out), findings


def redact(text: str, analyzer: Analyzer) -> str:
    """Mask every recognised entity: the ``redacted`` retention form of a text."""
    spans = analyzer.analyze(text)
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for s in spans:
        out.append(text[pos : s.start])
        out.append(mask_value(text[s.start : s.end], s.entity_type))
        pos = s.end
    out.append(text[pos:])
    return "".join(out)
