"""The key of a request answered beside the pipeline (models, count_tokens), read from
the auth headers of the dialect spoken at its path."""

from __future__ import annotations

from collections.abc import Mapping

from tokenplane.auth.principal import Principal
from tokenplane.dialects.base import Dialect, api_key
from tokenplane.errors import GatewayError
from tokenplane.meta.keystore import KeyStore


def key_principal(keys: KeyStore, headers: Mapping[str, str], dialect: Dialect) -> Principal:
    """The principal of the key sent in one of ``dialect``'s auth headers, or 401
    (the routes beside the pipeline: models, count_tokens)."""
    key = api_key(headers, dialect.auth_headers)
    principal = keys.authenticate(key) if key else None
    if principal is None:
        raise GatewayError(401, "You didn't provide a valid API key.", code="invalid_api_key")
    return principal
