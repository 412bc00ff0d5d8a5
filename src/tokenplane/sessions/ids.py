"""Which session and step a request belongs to: headers or OpenAI's ``metadata``.

``x-tokenplane-session: <id>`` and ``x-tokenplane-step: <n>``, or, in the body,
``metadata: {"tokenplane_session": "<id>", "tokenplane_step": "<n>"}`` (OpenAI's
``metadata`` holds strings only, so the step is a string of digits there). A
session id is 1 to 128 characters of letters, digits and
``. _ : -``, starting with a letter or digit; a step is an integer from 1 to
1,000,000. Anything else, or a header and a metadata field that disagree, is a 400
naming the field. The gateway takes the two metadata keys out of the body before
it is sent upstream. Without either, an agent's own session header (Claude Code's
``x-claude-code-session-id``) names the session.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenplane.errors import GatewayError, invalid

SESSION_HEADER = "x-tokenplane-session"
STEP_HEADER = "x-tokenplane-step"
META_SESSION = "tokenplane_session"
META_STEP = "tokenplane_step"
# the session ids agents send of their own accord (Claude Code: one per conversation),
# read when the request names no tokenplane session; a malformed one is ignored
AGENT_SESSION_HEADERS = ("x-claude-code-session-id",)
MAX_SESSION_ID = 128
MAX_STEP = 1_000_000
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


@dataclass(frozen=True, slots=True)
class SessionRef:
    """A request's session and, when the client named it, its step."""

    session_id: str
    step: int | None = None


def check_session_id(value: object, param: str) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(f"'{param}' must be a session id (a non-empty string)", param=param,
                      code="invalid_session")
    if len(value) > MAX_SESSION_ID or _SESSION_ID.fullmatch(value) is None:
        raise invalid(f"'{param}' must be 1 to {MAX_SESSION_ID} letters, digits or . _ : - "
                      "starting with a letter or digit", param=param, code="invalid_session")
    return value


def check_step(value: object, param: str) -> int:
    step: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        step = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 7:
        step = int(value)
    if step is None or not 1 <= step <= MAX_STEP:
        raise invalid(f"'{param}' must be a step number from 1 to {MAX_STEP}", param=param,
                      code="invalid_session_step")
    return step


def session_ref(headers: Mapping[str, str], body: dict[str, Any]) -> SessionRef | None:
    """The request's session (None: it names none). Raises a 400 on a bad value."""
    h_session = headers.get(SESSION_HEADER)
    h_step = headers.get(STEP_HEADER)
    meta = body.get("metadata")
    m_session = m_step = None
    if isinstance(meta, dict):
        m_session = meta.get(META_SESSION)
        m_step = meta.get(META_STEP)
    if h_session is None and m_session is None:
        if h_step is not None or m_step is not None:
            param = STEP_HEADER if h_step is not None else f"metadata.{META_STEP}"
            raise invalid(f"'{param}' needs a session: send {SESSION_HEADER} (or "
                          f"metadata.{META_SESSION}) too", param=param, code="invalid_session")
        return agent_session(headers)
    session = _agree(h_session, SESSION_HEADER, m_session, f"metadata.{META_SESSION}",
                     check_session_id)
    step = None
    if h_step is not None or m_step is not None:
        step = _agree(h_step, STEP_HEADER, m_step, f"metadata.{META_STEP}", check_step)
    return SessionRef(session, step)


def agent_session(headers: Mapping[str, str]) -> SessionRef | None:
    """The session an agent names in its own header (``AGENT_SESSION_HEADERS``)."""
    for name in AGENT_SESSION_HEADERS:
        value = headers.get(name)
        if value and len(value) <= MAX_SESSION_ID and _SESSION_ID.fullmatch(value):
            return SessionRef(value)
    return None


def _agree(header: object, h_param: str, meta: object, m_param: str, check: Any) -> Any:
    h = check(header, h_param) if header is not None else None
    m = check(meta, m_param) if meta is not None else None
    if h is not None and m is not None and h != m:
        raise invalid(f"'{h_param}' and '{m_param}' disagree ({h!r} and {m!r})",
                      param=m_param, code="invalid_session")
    return h if h is not None else m


def strip_metadata(body: dict[str, Any]) -> None:
    """Takes the session keys out of ``metadata`` (dropping it when nothing is left),
    so the upstream sees the client's own metadata only."""
    meta = body.get("metadata")
    if not isinstance(meta, dict) or (META_SESSION not in meta and META_STEP not in meta):
        return
    rest = {k: v for k, v in meta.items() if k not in (META_SESSION, META_STEP)}
    if rest:
        body["metadata"] = rest
    else:
        del body["metadata"]


def session_budget_error(session_id: str, message: str,
                         headers: dict[str, str] | None = None) -> GatewayError:
    """429 ``session_budget_exceeded`` naming the session."""
    return GatewayError(429, message, code="session_budget_exceeded", param=SESSION_HEADER,
                        headers=headers)
