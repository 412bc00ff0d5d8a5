"""Strict checks of the admin API's request bodies (``/admin/v1``).

Every field has one JSON type: a boolean must be ``true``/``false`` (never ``"false"``
or ``1``), an integer an integer (never a boolean), a string a string. A wrong type
is a 400 with ``code`` ``invalid_type``; a field the route does not know is a 400
with ``code`` ``unknown_parameter``; a bad name ``invalid_name``. ``param`` names the
field, dotted inside an object (``target.tenant``, ``limits.rpm``).
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Collection, Mapping
from typing import Any

from tokenplane.auth.key_expiry import parse_duration
from tokenplane.auth.roles import check_role
from tokenplane.errors import GatewayError, invalid

MAX_NAME_LEN = 128
MAX_TEXT_LEN = 256


def _param(field: str, prefix: str | None) -> str:
    return f"{prefix}.{field}" if prefix else field


def wrong_type(param: str, expected: str) -> GatewayError:
    return invalid(f"'{param}' must be {expected}.", param=param, code="invalid_type")


def only_fields(data: Mapping[str, Any], allowed: Collection[str],
                prefix: str | None = None) -> None:
    """Refuse any field not in ``allowed`` (the first one, sorted, is the param)."""
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        param = _param(unknown[0], prefix)
        raise invalid(f"Unknown parameter '{param}'; known: {sorted(allowed)}.",
                      param=param, code="unknown_parameter")


def _check_text(value: str, param: str, limit: int) -> str:
    if len(value) > limit:
        raise invalid(f"'{param}' is longer than {limit} characters.", param=param,
                      code="invalid_name")
    if any(unicodedata.category(c).startswith("C") for c in value):
        raise invalid(f"'{param}' must not contain control characters.", param=param,
                      code="invalid_name")
    if value != value.strip():
        raise invalid(f"'{param}' must not start or end with whitespace.", param=param,
                      code="invalid_name")
    return value


def check_name(value: Any, param: str, *, slash: bool = False) -> str:
    """A name of a tenant, department, app or key: a non-empty string of at most
    :data:`MAX_NAME_LEN` characters, no control characters, no leading or trailing
    whitespace, and (unless ``slash``) no ``/`` (scope ids are ``/``-separated)."""
    if not isinstance(value, str):
        raise wrong_type(param, "a string")
    if not value:
        raise invalid(f"'{param}' must not be empty.", param=param, code="invalid_name")
    if not slash and "/" in value:
        raise invalid(f"'{param}' must not contain '/'.", param=param, code="invalid_name")
    return _check_text(value, param, MAX_NAME_LEN)


def req_name(data: Mapping[str, Any], field: str, prefix: str | None = None) -> str:
    param = _param(field, prefix)
    if field not in data or data[field] is None:
        raise invalid(f"'{param}' is required.", param=param, code="missing_required_parameter")
    return check_name(data[field], param)


def opt_name(data: Mapping[str, Any], field: str, prefix: str | None = None, *,
             slash: bool = False) -> str | None:
    """An optional name; absent, ``null`` and ``""`` mean none."""
    value = data.get(field)
    if value is None or value == "":
        return None
    return check_name(value, _param(field, prefix), slash=slash)


def opt_text(data: Mapping[str, Any], field: str, prefix: str | None = None) -> str | None:
    """An optional free string (an end user, a model alias, a key id)."""
    value = data.get(field)
    if value is None or value == "":
        return None
    param = _param(field, prefix)
    if not isinstance(value, str):
        raise wrong_type(param, "a string")
    return _check_text(value, param, MAX_TEXT_LEN)


def opt_bool(data: Mapping[str, Any], field: str, default: bool) -> bool:
    value = data.get(field, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise wrong_type(field, "a JSON boolean (true or false)")
    return value


def opt_role(data: Mapping[str, Any], field: str = "role") -> str | None:
    """A key's role (auth/roles.py), or None."""
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise wrong_type(field, "a string")
    problem = check_role(value)
    if problem is not None:
        raise invalid(problem, param=field, code="invalid_role")
    return value


def opt_expiry(data: Mapping[str, Any], field: str = "expires_in",
               now: float | None = None) -> float | None:
    """When a new key expires (epoch seconds) from its lifetime (``"90d"``), or None."""
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise wrong_type(field, "a duration string such as \"90d\"")
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise invalid(str(exc), param=field, code="invalid_duration") from None
    return (time.time() if now is None else now) + seconds


def obj(data: Mapping[str, Any], field: str) -> dict[str, Any]:
    """A required JSON object field."""
    value = data.get(field)
    if not isinstance(value, dict):
        raise wrong_type(field, "a JSON object")
    return value


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# Each limit field of ``PUT /limits`` and its JSON type; ``null`` removes that limit.
LIMIT_TYPES: dict[str, str] = {
    "rpm": "int", "tpm": "int", "tokens_per_day": "int", "tokens_per_month": "int",
    "budget_micros": "int", "max_concurrent": "int", "max_tokens_in_flight": "int",
    "tpm_unit": "str", "budget_period": "str", "budget": "amount",
    "budget_resets_at": "numbers",
}

_EXPECTED = {"int": "an integer", "str": "a string",
             "amount": "a decimal amount (a string or a number)",
             "numbers": "an array of numbers (epoch seconds)"}


def check_limits(data: Mapping[str, Any], prefix: str = "limits") -> None:
    """Every field known and of its type (values are checked by the limit store)."""
    only_fields(data, LIMIT_TYPES, prefix)
    for field, value in data.items():
        if value is None:
            continue
        kind = LIMIT_TYPES[field]
        ok = {"int": is_int(value), "str": isinstance(value, str),
              "amount": isinstance(value, str) or is_number(value),
              "numbers": isinstance(value, list) and all(is_number(v) for v in value),
              }[kind]
        if not ok:
            raise wrong_type(_param(field, prefix), _EXPECTED[kind])
