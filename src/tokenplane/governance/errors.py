"""Governance's refusals: a policy said no (PII blocked, tool not allowed, injection
blocked). Each is a :class:`GatewayError` the HTTP edge renders like any other."""

from __future__ import annotations

from tokenplane.errors import GatewayError


class PolicyViolation(GatewayError):
    """A governance policy refused the request or its answer."""
