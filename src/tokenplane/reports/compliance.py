"""The compliance report's figures, from the audit log's request records (pure:
records in, counts out).

Each request record carries ``verdicts``: ``pii`` (per place scanned -- ``request``,
``response``, ``documents`` -- entity type -> action -> count), ``injection``
(``action`` flag or block, ``score``, ``labels``), ``documents`` (the RAG documents
the injection screen acted on: ``action`` log, flag, drop or block each), ``tools``
(``denied`` calls, ``stripped`` tools) and ``error`` (the refusal's code), and a
summary ``verdict`` (allow, flag, block)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ComplianceCounts:
    requests: int = 0
    by_verdict: dict[str, int] = field(default_factory=dict)
    pii_by_type: dict[str, dict[str, int]] = field(default_factory=dict)  # type -> action -> n
    pii_by_tenant: dict[str, dict[str, int]] = field(default_factory=dict)  # tenant -> type
    blocks_by_code: dict[str, int] = field(default_factory=dict)
    injection_by_action: dict[str, int] = field(default_factory=dict)
    injection_by_tenant: dict[str, int] = field(default_factory=dict)  # requests
    injection_documents: dict[str, int] = field(default_factory=dict)  # action -> documents
    tools_denied: dict[str, int] = field(default_factory=dict)  # tool name -> calls denied
    tools_denied_by_tenant: dict[str, int] = field(default_factory=dict)
    tools_stripped: int = 0
    tenants: set[str] = field(default_factory=set)

    @property
    def pii_total(self) -> int:
        return sum(sum(a.values()) for a in self.pii_by_type.values())

    def pii_actions(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for actions in self.pii_by_type.values():
            for action, n in actions.items():
                out[action] = out.get(action, 0) + n
        return out


def _bump(d: dict[str, int], k: str, n: int = 1) -> None:
    d[k] = d.get(k, 0) + n


def _tool_names(denied: Any) -> list[str]:
    out: list[str] = []
    for d in denied if isinstance(denied, list) else []:
        if isinstance(d, str):
            out.append(d)
        elif isinstance(d, Mapping):
            out.append(str(d.get("name") or d.get("tool") or "?"))
    return out


def count(records: Iterable[Mapping[str, Any]]) -> ComplianceCounts:
    """Counts over request records (other kinds -- checkpoints -- are skipped)."""
    c = ComplianceCounts()
    for rec in records:
        if rec.get("kind") != "request":
            continue
        tenant = str(rec.get("tenant") or "")
        c.requests += 1
        c.tenants.add(tenant)
        _bump(c.by_verdict, str(rec.get("verdict") or "allow"))
        v = rec.get("verdicts")
        if not isinstance(v, Mapping):
            continue
        pii = v.get("pii")
        if isinstance(pii, Mapping):
            for found in pii.values():
                if not isinstance(found, Mapping):
                    continue
                for etype, actions in found.items():
                    if not isinstance(actions, Mapping):
                        continue
                    for action, n in actions.items():
                        if isinstance(n, int) and n > 0:
                            _bump(c.pii_by_type.setdefault(str(etype), {}), str(action), n)
                            _bump(c.pii_by_tenant.setdefault(tenant, {}), str(etype), n)
        if rec.get("verdict") == "block":
            _bump(c.blocks_by_code, str(v.get("error") or "blocked"))
        inj = v.get("injection")
        acted = False
        if isinstance(inj, Mapping) and inj.get("action") in ("flag", "block"):
            _bump(c.injection_by_action, str(inj["action"]))
            acted = True
        docs = v.get("documents")
        for d in docs if isinstance(docs, list) else ():
            if isinstance(d, Mapping) and d.get("action") in ("flag", "drop", "block"):
                _bump(c.injection_documents, str(d["action"]))
                acted = True
        if acted:
            _bump(c.injection_by_tenant, tenant)
        tools = v.get("tools")
        if isinstance(tools, Mapping):
            names = _tool_names(tools.get("denied"))
            for name in names:
                _bump(c.tools_denied, name)
            if names:
                _bump(c.tools_denied_by_tenant, tenant, len(names))
            stripped = tools.get("stripped")
            if isinstance(stripped, list):
                c.tools_stripped += len(stripped)
    return c
