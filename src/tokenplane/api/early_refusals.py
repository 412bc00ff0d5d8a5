"""The front's screen (``api/front/screen.py``) for this gateway: a large request whose
key is known to be refused (past a request rate, or out of its pace of bytes refused
for their size: ``SideAdmission.precheck``) gets its 429 before its body is read. A
request without a key, or with one the key store does not know, passes: the route
gives it its 401 as always."""

from __future__ import annotations

from multidict import CIMultiDict

from tokenplane.admission.gateway.side_calls import SideAdmission
from tokenplane.api.front.screen import Screen
from tokenplane.errors import GatewayError
from tokenplane.meta.keystore import KeyStore


def presented_key(headers: CIMultiDict[str]) -> str:
    scheme, _, key = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and key.strip():
        return key.strip()
    return (headers.get("api-key") or headers.get("x-api-key") or "").strip()


def refusal_screen(keys: KeyStore, side: SideAdmission) -> Screen:
    def screen(path: str, headers: CIMultiDict[str]) -> GatewayError | None:
        if not path.startswith("/v1/"):  # the API the rates apply to (not admin, console)
            return None
        key = presented_key(headers)
        principal = keys.authenticate(key) if key else None
        if principal is None:
            return None
        try:
            side.precheck(principal)
        except GatewayError as err:
            return err
        return None
    return screen
