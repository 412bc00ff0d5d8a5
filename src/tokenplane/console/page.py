"""What a page builder gets: the request, the signed-in principal and its key, the
gateway's parts, the clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tokenplane.auth.principal import Principal
from tokenplane.console.admin_client import AdminAnswer, admin_get
from tokenplane.console.parts import ConsoleParts
from tokenplane.metering.stores.base import LedgerSink


class PageError(Exception):
    """A page that cannot be shown to this key (403) or with these inputs (400)."""

    def __init__(self, status: int, message_key: str) -> None:
        super().__init__(message_key)
        self.status = status
        self.message_key = message_key


@dataclass
class Page:
    request: web.Request
    principal: Principal
    key: str
    parts: ConsoleParts
    now: float

    @property
    def sink(self) -> LedgerSink:
        return self.parts.sink()

    @property
    def admin(self) -> bool:
        return self.principal.admin

    def arg(self, name: str) -> str | None:
        value = self.request.query.get(name, "").strip()
        return value or None

    def tenant(self) -> str | None:
        """The tenant filter: an admin's choice (None: all), else the key's own; a
        tenant key naming another tenant is refused (403), as the admin API does."""
        asked = self.arg("tenant")
        if self.principal.admin:
            return asked
        if asked is not None and asked != self.principal.tenant:
            raise PageError(403, "error.other_tenant")
        return self.principal.tenant

    def require_admin(self) -> None:
        if not self.principal.admin:
            raise PageError(403, "error.admin_only")

    async def admin_api(self, path: str, query: dict[str, str] | None = None) -> AdminAnswer:
        return await admin_get(self.request, self.key, path, query, self.parts.keys)


Data = dict[str, Any]
