"""Console sign-in with OpenID Connect: the authorization code flow with PKCE (S256),
state and nonce, against the provider ``console.oidc`` names.

``start`` sends the browser to the provider's authorization endpoint and keeps the
flow's secrets (state, nonce, PKCE verifier) in a short-lived encrypted cookie;
``finish`` exchanges the code at the token endpoint (client secret by HTTP Basic when
configured), checks the ID token (console/id_token.py: signature against the
provider's keys, issuer, audience, expiry, nonce) and maps its claims to a tenant, a
role and a department (:func:`identity`). The console then signs the person in with a
key of that role that expires with the session (console/routes.py), so every check
of the admin routes and pages applies to them unchanged, and signing out revokes it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from cryptography.fernet import Fernet, InvalidToken

from tokenplane.auth.roles import OPERATOR, OPERATOR_TENANT, ROLES
from tokenplane.config.console_schema import OidcConfig
from tokenplane.console.id_token import TokenError, verify_id_token

FLOW_COOKIE = "tp_oidc"
FLOW_TTL_S = 600  # a sign-in at the provider must finish within this
HTTP_TIMEOUT_S = 10.0


class SignInError(Exception):
    """A sign-in that cannot finish; ``status``: 400 (the browser's request), 403
    (the identity has no access), 502 (the provider)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Flow:
    state: str
    nonce: str
    verifier: str
    redirect_uri: str


@dataclass(frozen=True, slots=True)
class Identity:
    subject: str
    tenant: str
    role: str
    department: str | None


def identity(claims: dict[str, Any], cfg: OidcConfig) -> Identity:
    """The tenant, role and department the claims give (SignInError 403 if none)."""
    role = claims.get(cfg.role_claim, cfg.default_role)
    if not isinstance(role, str) or role not in ROLES:
        raise SignInError(403, f"the identity's role claim {cfg.role_claim!r} is not a "
                               "tokenplane role")
    tenant = claims.get(cfg.tenant_claim)
    if tenant is None and role == OPERATOR:
        tenant = OPERATOR_TENANT
    if not isinstance(tenant, str) or not tenant:
        raise SignInError(403, f"the identity has no tenant claim {cfg.tenant_claim!r}")
    department = claims.get(cfg.department_claim) if cfg.department_claim else None
    if department is not None and not isinstance(department, str):
        raise SignInError(403, "the department claim is not a name")
    return Identity(str(claims["sub"]), tenant, role, department or None)


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class OidcClient:
    def __init__(self, cfg: OidcConfig, secret: bytes) -> None:
        self.cfg = cfg
        self._fernet = Fernet(base64.urlsafe_b64encode(hashlib.sha256(b"oidc" + secret).digest()))
        self._discovery: dict[str, Any] | None = None
        self._jwks: dict[str, Any] | None = None

    async def _get(self, http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
        try:
            async with http.get(url) as resp:
                if resp.status != 200:
                    raise SignInError(502, f"the provider answered {resp.status} at {url}")
                data = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise SignInError(502, f"the provider is unreachable ({exc})") from None
        if not isinstance(data, dict):
            raise SignInError(502, f"the provider's {url} is not a JSON object")
        return data

    async def discovery(self, http: aiohttp.ClientSession) -> dict[str, Any]:
        if self._discovery is None:
            url = self.cfg.issuer.rstrip("/") + "/.well-known/openid-configuration"
            doc = await self._get(http, url)
            if doc.get("issuer") != self.cfg.issuer:
                raise SignInError(502, "the provider's discovery document names another "
                                       "issuer")
            self._discovery = doc
        return self._discovery

    async def start(self, redirect_uri: str) -> tuple[str, str]:
        """The authorization URL to send the browser to, and the flow cookie."""
        flow = Flow(secrets.token_urlsafe(24), secrets.token_urlsafe(24),
                    secrets.token_urlsafe(48), redirect_uri)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(HTTP_TIMEOUT_S)) as http:
            doc = await self.discovery(http)
        query = urlencode({
            "response_type": "code", "client_id": self.cfg.client_id,
            "redirect_uri": redirect_uri, "scope": " ".join(self.cfg.scopes),
            "state": flow.state, "nonce": flow.nonce,
            "code_challenge": _challenge(flow.verifier), "code_challenge_method": "S256"})
        cookie = self._fernet.encrypt(orjson.dumps(
            [flow.state, flow.nonce, flow.verifier, flow.redirect_uri])).decode("ascii")
        return f"{doc['authorization_endpoint']}?{query}", cookie

    def flow(self, cookie: str | None) -> Flow | None:
        if not cookie:
            return None
        try:
            data = orjson.loads(self._fernet.decrypt(cookie.encode("ascii"), ttl=FLOW_TTL_S))
        except (InvalidToken, UnicodeEncodeError, orjson.JSONDecodeError):
            return None
        if not (isinstance(data, list) and len(data) == 4
                and all(isinstance(v, str) for v in data)):
            return None
        return Flow(*data)

    async def finish(self, flow: Flow, code: str) -> dict[str, Any]:
        """The verified ID token claims for ``code``."""
        form = {"grant_type": "authorization_code", "code": code,
                "redirect_uri": flow.redirect_uri, "code_verifier": flow.verifier}
        headers: dict[str, str] = {"Accept": "application/json"}
        secret_env = self.cfg.client_secret_env
        secret = os.environ.get(secret_env) if secret_env else None
        if secret:  # client_secret_basic: each part form-encoded first (RFC 6749 2.3.1)
            pair = f"{quote(self.cfg.client_id, safe='')}:{quote(secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form["client_id"] = self.cfg.client_id
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(HTTP_TIMEOUT_S)) as http:
            doc = await self.discovery(http)
            try:
                async with http.post(doc["token_endpoint"], data=form, headers=headers) as resp:
                    body = await resp.json(content_type=None)
                    status = resp.status
            except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                raise SignInError(502, f"the provider is unreachable ({exc})") from None
            if status != 200 or not isinstance(body, dict) or "id_token" not in body:
                reason = body.get("error") if isinstance(body, dict) else None
                raise SignInError(400 if status == 400 else 502,
                                  f"the provider refused the code ({reason or status})")
            token = str(body["id_token"])
            for attempt in range(2):  # the provider may have rotated its keys: refetch once
                if self._jwks is None or attempt == 1:
                    self._jwks = await self._get(http, doc["jwks_uri"])
                try:
                    return verify_id_token(token, self._jwks, issuer=self.cfg.issuer,
                                           client_id=self.cfg.client_id, nonce=flow.nonce,
                                           now=time.time())
                except TokenError as exc:
                    if attempt == 1 or not exc.key_problem:
                        raise SignInError(400, str(exc)) from None
        raise SignInError(400, "the ID token does not verify")  # not reached
