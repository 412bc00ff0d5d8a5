"""Small checks of a Messages request's JSON values; each failure is a 400 naming the
field's path (``messages[2].content[0].text``)."""

from __future__ import annotations

from typing import Any, TypeGuard

from tokenplane.errors import GatewayError, invalid


def bad(param: str, message: str, code: str | None = None) -> GatewayError:
    return invalid(f"{param}: {message}", param=param, code=code)


def is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: object) -> TypeGuard[int | float]:
    return isinstance(v, int | float) and not isinstance(v, bool)


def need_str(d: dict[str, Any], key: str, path: str) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise bad(f"{path}.{key}", "Field required" if v is None else "Input should be a string")
    return v


def need_dict(v: object, param: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise bad(param, "Input should be an object")
    return v


def need_list(v: object, param: str) -> list[Any]:
    if not isinstance(v, list):
        raise bad(param, "Input should be a list")
    return v


def cache_control(block: dict[str, Any], path: str) -> dict[str, Any] | None:
    """The block's ``cache_control`` ({"type": "ephemeral", "ttl"?: "5m" | "1h"}), checked."""
    cc = block.get("cache_control")
    if cc is None:
        return None
    param = f"{path}.cache_control"
    cc = need_dict(cc, param)
    if cc.get("type") != "ephemeral":
        raise bad(f"{param}.type", "Input should be 'ephemeral'")
    if cc.get("ttl") not in (None, "5m", "1h"):
        raise bad(f"{param}.ttl", "Input should be '5m' or '1h'")
    return cc
