"""The audit chain's status (admin keys): each worker's log verified against its hash
chain, checkpoints and signed head, on demand (it reads the whole log)."""

from __future__ import annotations

import asyncio
from typing import Any

from tokenplane.console.page import Page
from tokenplane.governance.audit.multi import log_dirs
from tokenplane.governance.audit.service import audit_root
from tokenplane.governance.audit.verify import verify


async def chain_status(page: Page) -> list[dict[str, Any]] | None:
    """One row per log (None: no audit log is kept)."""
    page.require_admin()
    verifier = page.parts.audit_verifier
    if verifier is None:
        return None
    root = audit_root(page.parts.home)

    def run() -> list[dict[str, Any]]:
        out = []
        for d in log_dirs(root):
            res = verify(d, verifier)
            out.append({"log": d.name, "ok": res.ok, "records": res.records,
                        "checkpoints": res.checkpoints, "first_bad_seq": res.first_bad_seq,
                        "reason": res.reason})
        return out

    return await asyncio.to_thread(run)
