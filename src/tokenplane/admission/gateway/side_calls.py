"""Admission for calls that never reach an upstream but still cost the gateway work:
``POST /v1/context/pack`` (its request, and the tokens it counts) and requests
refused for their size (``context_length_exceeded``: their request, and their bytes
against the key's pace). Each is one reservation at the caller's chain, settled at
once with what it used, so the limits count it like any request: the key's ``rpm``
refuses the next one (429) when it is spent, across replicas when the store is
shared. :meth:`SideAdmission.precheck` answers a caller known to be past its rate
(``admission/refusals.py``) before its body is parsed."""

from __future__ import annotations

import math
import time

from tokenplane.admission.amounts import Amounts
from tokenplane.admission.errors import denial_error, unavailable_error
from tokenplane.admission.gateway.service import AdmissionService
from tokenplane.admission.outcomes import Denial, Grant
from tokenplane.admission.stores.base import StoreUnavailable
from tokenplane.auth.principal import Principal
from tokenplane.errors import GatewayError


class SideAdmission:
    def __init__(self, svc: AdmissionService) -> None:
        self.svc = svc

    async def admit(self, p: Principal, alias: str | None, reservation_id: str,
                    input_tokens: int = 0) -> Grant | None:
        """Reserves one request (and ``input_tokens``); raises the 429 (or 503 when
        the store is down and fail-closed) a refusal renders as. ``None``: nothing
        limits this caller."""
        svc = self.svc
        if not svc.cfg.enabled:
            return None
        svc.refresh()
        scopes = svc.scopes(p, alias)
        if not any(svc.admission.table.rules(s) for s in scopes):
            return None
        try:
            result = await svc.admission.reserve(scopes, Amounts(1, input_tokens),
                                                 time.time(), reservation_id=reservation_id)
        except StoreUnavailable as exc:
            svc.note_store_health()
            svc.metrics.admission_unavailable.labels(p.tenant).inc()
            raise unavailable_error(exc) from None
        if isinstance(result, Denial):
            svc.refusals.note(result, time.time())
            code = "request_exceeds_limit" if result.never else result.code
            svc.metrics.admission_denials.labels(code, result.scope.kind, p.tenant).inc()
            raise denial_error(result, currency=svc.currency())
        return result

    async def settle(self, grant: Grant | None, input_tokens: int = 0) -> None:
        """The call's real use: its one request and the tokens it counted."""
        if grant is None:
            return
        try:
            await self.svc.admission.reconcile(grant, Amounts(1, input_tokens), time.time())
        except StoreUnavailable:
            self.svc.note_store_health()  # the reservation expires as if fully used

    def precheck(self, p: Principal) -> None:
        """429 at once for a caller refused by a request rate that has no room yet, or
        a key that spent its pace of refused bytes; nothing otherwise (no store round
        trip)."""
        svc = self.svc
        if not svc.cfg.enabled:
            return
        svc.refresh()  # limits changed meanwhile: what was remembered is forgotten
        now = time.time()
        denial = svc.refusals.refused(svc.scopes(p, None), now)
        if denial is not None:
            svc.metrics.admission_denials.labels(denial.code, denial.scope.kind,
                                                 p.tenant).inc()
            raise denial_error(denial, currency=svc.currency())
        wait = svc.oversize.wait(p.key_id, now)
        if wait > 0:
            raise paced_error(wait)

    async def count_refusal(self, p: Principal, alias: str | None, reservation_id: str,
                            body_bytes: int) -> None:
        """A request refused before admission for its size: one request spent (a
        refusal of this refusal tells the client nothing new: it gets its 400, and
        the next call its 429), and its bytes against the key's pace."""
        svc = self.svc
        if not svc.cfg.enabled:
            return
        svc.oversize.spend(p.key_id, body_bytes, time.time())
        try:
            grant = await self.admit(p, alias, reservation_id)
        except GatewayError:  # past the rate already (remembered), or the store is down
            return
        await self.settle(grant)


def paced_error(wait_s: float) -> GatewayError:
    return GatewayError(
        429, "This key has sent too many bytes in requests refused for their size; "
        f"retry in {math.ceil(wait_s)} s.", code="rate_limit_exceeded",
        headers={"retry-after": str(max(1, math.ceil(wait_s)))})
