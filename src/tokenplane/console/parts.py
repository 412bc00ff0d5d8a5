"""What the console reads of a running gateway (handed over by ``app.build_app``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenplane.admission.gateway.service import AdmissionService
from tokenplane.compose.routing import Routing
from tokenplane.config.console_schema import ConsoleConfig
from tokenplane.governance.audit.signing import Verifier
from tokenplane.meta.keystore import KeyStore
from tokenplane.meta.limit_store import LimitStore
from tokenplane.metering.pricing import PriceBook
from tokenplane.metering.stores.base import LedgerSink


@dataclass
class ConsoleParts:
    config: ConsoleConfig
    home: Path
    keys: KeyStore
    sink: Callable[[], LedgerSink]
    admission: AdmissionService
    limits: LimitStore
    routing: Routing | None = None
    audit_verifier: Verifier | None = None  # the audit log's public key (governance.audit)
    prices: Callable[[], PriceBook | None] | None = None  # the meter's price book (cache savings)
    mcp_configured: bool = False  # the MCP gateway is on (the Tools page says so otherwise)
