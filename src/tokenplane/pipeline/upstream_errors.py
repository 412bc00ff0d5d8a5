"""What a client hears when the upstream answers with an error, and what the log keeps.

The upstream's own text never reaches the tenant: providers echo request details and,
now and then, the credential the gateway sent (a wrong key is quoted back in a 401).
The client gets the upstream's status class and a code of ours; the upstream's text is
logged server-side with secrets scrubbed (the backend's own key, bearer tokens,
``sk-``-style keys and other long opaque tokens). A safe ``param`` (a field path) of a
4xx is kept: it names what the client sent.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Collection
from typing import Any

import orjson

from tokenplane.errors import GatewayError
from tokenplane.upstream.pool import Endpoint

log = logging.getLogger("tokenplane.upstream")

_SECRETS = re.compile(
    r"(?i)bearer\s+\S+"  # an Authorization value quoted back
    r"|\b(?:sk|pk|rk|ak)-[A-Za-z0-9_\-]{8,}"  # OpenAI-style and similar API keys
    r"|\b[A-Za-z0-9_\-+/=]{32,}"  # long opaque tokens (JWTs, hex/base64 secrets)
)
_PARAM = re.compile(r"[A-Za-z_][A-Za-z0-9_.\[\]]{0,127}")
_LOG_LIMIT = 1000


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with the given secret values and anything shaped like a credential
    replaced by ``[redacted]``."""
    for s in secrets:
        if s:
            text = text.replace(s, "[redacted]")
    return _SECRETS.sub("[redacted]", text)


def _backend_secrets(ep: Endpoint | None) -> tuple[str, ...]:
    env = ep.backend.api_key_env if ep is not None else None
    value = os.environ.get(env) if env else None
    return (value,) if value else ()


def _error_object(body: bytes | None) -> dict[str, Any] | None:
    """The error object of an answer: OpenAI's ``{"error": {...}}``, or the top-level
    ``{"object": "error", "message", "param", ...}`` that vLLM and SGLang send."""
    try:
        data = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    err = data.get("error")
    if isinstance(err, dict):
        return err
    detail = data.get("detail")  # FastAPI's 422: [{"loc": ["body", "temperature"], ...}]
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        loc = detail[0].get("loc")
        msg = detail[0].get("msg")
        if isinstance(loc, list) and loc[:1] == ["body"] and len(loc) > 1:
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[1:])
            return {"message": msg if isinstance(msg, str) else str(detail[0]),
                    "param": path.lstrip(".")}
    return data if data.get("object") == "error" or "message" in data else None


def request_param(p: Any, fields: Collection[str] | None) -> str | None:
    """The upstream's ``param`` when it names a field of the client's request (``temperature``,
    ``messages[0].content``, ``messages.[0].role``): it names what the client sent, so
    the client may see it. Anything else (an engine's internal name) stays in the log."""
    if not isinstance(p, str) or not _PARAM.fullmatch(p):
        return None
    root = re.split(r"[.\[]", p, maxsplit=1)[0]
    return p if fields is None or root in fields else None


def upstream_failure(status: int, body: bytes | None, ep: Endpoint | None = None,
                     request_id: str = "",
                     fields: Collection[str] | None = None) -> GatewayError:
    """The client's error for an upstream's error answer (the text goes to the log);
    ``fields``: the top-level fields of the request sent (the param must name one)."""
    upstream_code: str | None = None
    text = (body or b"")[:4096].decode("utf-8", "replace")
    err = _error_object(body)
    param = None
    if err is not None:
        if isinstance(err.get("message"), str):
            text = err["message"]
        if isinstance(err.get("code"), str):
            upstream_code = err["code"]
        param = request_param(err.get("param"), fields)
    where = ep.id if ep is not None else "upstream"
    log.warning("request %s: %s answered HTTP %d (%s): %s", request_id, where, status,
                upstream_code or "no code", scrub(text, _backend_secrets(ep))[:_LOG_LIMIT])
    if 400 <= status < 500 and status not in (401, 403, 404, 429):
        return GatewayError(
            status, f"The model server rejected the request (HTTP {status})"
            + (f" at '{param}'." if param else "."), param=param,
            code="upstream_invalid_request")
    if status == 429:
        return GatewayError(429, "The model server is rate limiting; retry later.",
                            code="upstream_rate_limited", headers={"retry-after": "1"})
    mapped = 504 if status == 504 else 503 if status == 503 else 502
    reason = ("refused the gateway's credentials" if status in (401, 403)
              else f"failed (HTTP {status})")
    return GatewayError(mapped, f"The model server {reason}.", code="upstream_error")
