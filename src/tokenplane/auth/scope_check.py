"""The key-scope checks the request path calls (kept out of the stages so that a
stage that resolves keys another way calls the same checks): a read-only key
(``viewer``, ``auditor``: auth/roles.py) may not call the inference API."""

from __future__ import annotations

from tokenplane.auth.principal import Principal
from tokenplane.auth.roles import inference_problem, role_of
from tokenplane.errors import GatewayError


def check_inference_scope(principal: Principal) -> None:
    """403 ``key_scope`` for a key whose role cannot call the inference API."""
    problem = inference_problem(role_of(principal.admin, principal.role))
    if problem is not None:
        raise GatewayError(403, problem, code="key_scope")
