"""Is a client's JSON Schema usable? (``response_format.json_schema.schema`` and the
``parameters`` of a tool): the structural mistakes that no model could honour are a
400 naming the field, at the gateway and at the simulated engine alike.

Refused: a schema that is not an object (or a boolean), a ``type`` that is not one of
JSON Schema's seven names (or a list of them), ``properties`` / ``$defs`` /
``definitions`` that are not objects of schemas, a ``required`` that is not a list of
strings, ``items`` that is not a schema, an empty or non-list ``enum``, ``anyOf`` /
``oneOf`` / ``allOf`` that are not non-empty lists of schemas, ``minItems`` >
``maxItems`` (or ``minimum`` > ``maximum``, ``minLength`` > ``maxLength``), and a
``$ref`` that is not a local pointer (``#``, ``#/$defs/X``, ``#/definitions/X``) resolving
inside the schema. Keywords not listed pass unchecked (``pattern``, ``format``,
``additionalProperties``, ``description``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenplane.errors import GatewayError, invalid

TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean", "null"})
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
_BOUNDS = (("minItems", "maxItems"), ("minimum", "maximum"), ("minLength", "maxLength"),
           ("minProperties", "maxProperties"))
MAX_DEPTH = 64


def resolve_ref(root: Mapping[str, Any], ref: str) -> Any:
    """The schema a local ``$ref`` points at; KeyError when it does not resolve."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        raise KeyError(ref)
    node: Any = root
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(ref)
        node = node[part]
    return node


def check_schema(schema: Any, param: str) -> None:
    """400 (``invalid_value``, naming the path below ``param``) unless ``schema`` is a
    usable JSON Schema."""
    if not isinstance(schema, Mapping):
        raise invalid(f"'{param}' must be a JSON Schema object", param=param,
                      code="invalid_type")
    _walk(schema, schema, param, 0)


def _bad(param: str, what: str) -> GatewayError:
    return invalid(f"'{param}' {what}", param=param, code="invalid_value")


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _walk(root: Mapping[str, Any], node: Any, param: str, depth: int) -> None:
    if isinstance(node, bool):
        return
    if not isinstance(node, Mapping):
        raise _bad(param, "must be a schema (an object or a boolean)")
    if depth > MAX_DEPTH:
        raise _bad(param, f"nests deeper than {MAX_DEPTH} levels")
    t = node.get("type")
    if t is not None:
        names = t if isinstance(t, list) else [t]
        if not names or any(not isinstance(x, str) or x not in TYPES for x in names):
            raise _bad(f"{param}.type", f"must be one of {sorted(TYPES)} or a list of them")
    ref = node.get("$ref")
    if ref is not None:
        if not isinstance(ref, str):
            raise _bad(f"{param}.$ref", "must be a string")
        try:
            resolve_ref(root, ref)
        except KeyError:
            raise _bad(f"{param}.$ref", f"does not resolve inside the schema: {ref!r}") from None
    for key in ("properties", "$defs", "definitions", "patternProperties"):
        sub = node.get(key)
        if sub is None:
            continue
        if not isinstance(sub, Mapping):
            raise _bad(f"{param}.{key}", "must be an object of schemas")
        for name, child in sub.items():
            _walk(root, child, f"{param}.{key}.{name}", depth + 1)
    req = node.get("required")
    if req is not None and (not isinstance(req, list)
                            or not all(isinstance(x, str) for x in req)):
        raise _bad(f"{param}.required", "must be an array of property names")
    for key in ("items", "additionalProperties", "not", "contains"):
        sub = node.get(key)
        if sub is not None:
            _walk(root, sub, f"{param}.{key}", depth + 1)
    prefix = node.get("prefixItems")
    if prefix is not None:
        if not isinstance(prefix, list):
            raise _bad(f"{param}.prefixItems", "must be an array of schemas")
        for i, child in enumerate(prefix):
            _walk(root, child, f"{param}.prefixItems[{i}]", depth + 1)
    enum = node.get("enum")
    if enum is not None and (not isinstance(enum, list) or not enum):
        raise _bad(f"{param}.enum", "must be a non-empty array")
    for key in _SUBSCHEMA_LISTS:
        subs = node.get(key)
        if subs is None:
            continue
        if not isinstance(subs, list) or not subs:
            raise _bad(f"{param}.{key}", "must be a non-empty array of schemas")
        for i, child in enumerate(subs):
            _walk(root, child, f"{param}.{key}[{i}]", depth + 1)
    for lo_key, hi_key in _BOUNDS:
        lo, hi = node.get(lo_key), node.get(hi_key)
        for key, v in ((lo_key, lo), (hi_key, hi)):
            if v is not None and not _is_num(v):
                raise _bad(f"{param}.{key}", "must be a number")
        if lo is not None and hi is not None and lo > hi:
            raise _bad(f"{param}.{lo_key}", f"is greater than {hi_key}")
