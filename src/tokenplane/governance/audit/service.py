"""The audit service, off the event loop.

:class:`AuditService` owns the worker's :class:`AuditLog` (``<data_dir>/audit/<worker>/``)
and a single worker thread: appends (which redact content per the retention mode),
the periodic group commit and the daily retention prune all run there in order, so
the log has one writer and the event loop never waits for redaction or file I/O.
Records reach the thread in batches, at most one hand-off per ``handoff_s``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tokenplane.config.governance_schema import AuditConfig
from tokenplane.governance.analyzer import Analyzer
from tokenplane.governance.audit.chain import Keys
from tokenplane.governance.audit.entry import AuditEntry
from tokenplane.governance.audit.keyfile import key_from_env, resolve_key, risk_warning
from tokenplane.governance.audit.log import AuditLog
from tokenplane.governance.audit.segments import list_segments, segment_day
from tokenplane.governance.pii_policy import redact
from tokenplane.periodic import Periodic

log = logging.getLogger("tokenplane.audit")
DAY_S = 86400.0
HANDOFF_S = 0.005  # records wait at most this long for the audit thread to take them
MAX_BATCH = 256  # ... or until this many are queued


def audit_root(home: Path) -> Path:
    return home / "audit"


def audit_redactor(analyzer: Analyzer) -> Callable[[str], str]:
    """The ``redacted`` retention form of a text: every recognised entity masked."""

    def redactor(text: str) -> str:
        # No built-in entity is shorter than 6 characters (a@b.cn); most texts are
        # proved clean by the analyzer's gates alone.
        if len(text) < 6 or analyzer.nothing_in(text):
            return text
        return redact(text, analyzer)

    return redactor


class AuditService:
    """The worker's audit log behind one thread. ``submit`` never blocks the loop."""

    def __init__(self, audit: AuditLog, config: AuditConfig,
                 clock: Callable[[], float] = time.time) -> None:
        self.log = audit
        self.config = config
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenplane-audit")
        self._timer = Periodic("audit-flush", config.flush_interval_s, self._flush_and_prune,
                               log=log, failure="audit flush failed")
        self._last_prune = 0.0
        self.submitted = 0  # written on the event loop only
        self.completed = 0  # written by the audit thread only
        self.max_backlog = 10_000
        self._batch: list[tuple[AuditEntry, float]] = []  # not yet handed off
        self._handoff_due = False
        self.handoff_s = HANDOFF_S

    @classmethod
    def open(cls, home: Path, worker_id: str | None, config: AuditConfig,
             redactor: Callable[[str], str]) -> AuditService:
        """The worker's log, its key resolved per ``config`` (see ``keyfile``). A key in
        the data directory (nothing configured) is warned about at every start."""
        found = resolve_key(home, config.key_env, config.key_file)
        assert found is not None
        key, source = found
        if source.in_data_dir:
            log.warning(risk_warning(source, config.key_env))
        elif source.kind == "file" and os.stat(source.where).st_mode & 0o077:
            log.warning("audit key file %s can be read by other users: chmod 600 it",
                        source.where)
        audit = AuditLog(audit_root(home) / (worker_id or "main"), key, config.checkpoint_every,
                         checkpoint_interval_s=config.checkpoint_interval_s,
                         retention=config.retention, redactor=redactor, fsync=config.fsync)
        log.info("audit log %s signed by Ed25519 key %s (public key %s, secret from %s)",
                 audit.dir, audit.signer.signer, audit.signer.public_hex, source.describe())
        if config.retention == "full":
            assert config.encryption_key_env is not None
            content_key = key_from_env(config.encryption_key_env)
            if content_key is None:
                raise ValueError(f"audit retention 'full' needs ${config.encryption_key_env}")
            audit.keys = Keys(audit.keys.mac, Keys.derive(content_key).content)
        return cls(audit, config)

    def submit(self, entry: AuditEntry, ts: float) -> None:
        """Queue one record. If the audit thread has fallen ``max_backlog`` records
        behind, the record is kept without its content (marked ``content_dropped``)
        so the backlog drains instead of growing without bound.

        Records queued within ``handoff_s`` (or until ``MAX_BATCH`` are queued) reach
        the audit thread as one task: one hand-off and one thread wake-up for many
        requests. ``flush`` and ``close`` hand off what is queued at once."""
        if self.submitted - self.completed > self.max_backlog and entry.content is not None:
            entry.content = None
            entry.verdicts = {**entry.verdicts, "content_dropped": "audit_backlog"}
        self.submitted += 1
        batch = self._batch
        batch.append((entry, ts))
        if len(batch) >= MAX_BATCH:
            self._hand_off()
        elif not self._handoff_due:
            try:
                asyncio.get_running_loop().call_later(self.handoff_s, self._hand_off)
                self._handoff_due = True
            except RuntimeError:  # no loop running here: hand off at once
                self._hand_off()

    def _hand_off(self) -> None:
        self._handoff_due = False
        if self._batch:
            batch, self._batch = self._batch, []
            self._pool.submit(self._append_all, batch)

    def _append_all(self, batch: list[tuple[AuditEntry, float]]) -> None:
        for entry, ts in batch:
            self._append(entry, ts)

    def _append(self, entry: AuditEntry, ts: float) -> None:
        try:
            self.log.append(entry, ts)
        except Exception:
            log.exception("audit append failed for %s", entry.request_id)
        finally:
            self.completed += 1  # only this thread writes it

    async def flush(self) -> None:
        """Everything submitted so far is written and the head re-signed."""
        self._hand_off()
        await asyncio.wrap_future(self._pool.submit(self.log.flush, self.clock()))

    async def start(self) -> None:
        self._timer.start()

    async def _flush_and_prune(self) -> None:
        await self.flush()
        now = self.clock()
        if self.config.retention_days > 0 and now - self._last_prune >= DAY_S:
            self._last_prune = now
            removed = await asyncio.wrap_future(self._pool.submit(self._prune, now))
            if removed:
                log.info("audit retention: pruned %d records older than %g days",
                         removed, self.config.retention_days)

    def _prune(self, now: float) -> int:
        """Prune when the oldest segment is past retention (reopening the log starts a
        new segment, so a log with nothing to drop is left alone)."""
        cutoff = now - self.config.retention_days * DAY_S
        segments = list_segments(self.log.dir)
        if not segments or segment_day(segments[0]) >= time.strftime("%Y%m%d",
                                                                     time.gmtime(cutoff)):
            return 0
        return self.log.prune(now, self.config.retention_days)

    async def close(self) -> None:
        await self._timer.close()
        self._hand_off()
        await asyncio.wrap_future(self._pool.submit(self.log.close))
        self._pool.shutdown(wait=True)
