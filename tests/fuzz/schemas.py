"""Hypothesis strategies from the JSON Schemas of the gateway's ``/openapi.json``.

Covers the part of JSON Schema the document uses (``type``, ``enum``, ``const``,
bounds, ``items``, ``properties``/``required``/``additionalProperties``,
``propertyNames``, ``anyOf``/``oneOf``): :func:`valid` draws values the schema
accepts; :func:`wrong` is a value of a JSON type the schema does not accept;
:func:`minimal` a small deterministic valid value; :func:`field_paths` every field
with the param the gateway must name when that field is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

Schema = dict[str, Any]
UNBOUNDED = 5000  # how far past a lower bound an integer without an upper one is drawn

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def options(schema: Schema) -> list[Schema]:
    """The alternatives of an ``anyOf``/``oneOf`` (the schema itself otherwise)."""
    alts = schema.get("anyOf") or schema.get("oneOf")
    if alts is None:
        return [schema]
    return [o for a in alts for o in options(a)]


def not_null(schema: Schema) -> list[Schema]:
    return [o for o in options(schema) if o.get("type") != "null"]


def valid(schema: Schema, depth: int = 0) -> st.SearchStrategy[Any]:
    alts = schema.get("anyOf") or schema.get("oneOf")
    if alts is not None:
        return st.one_of([valid(a, depth) for a in alts])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema.get("type")
    if t == "null":
        return st.none()
    if t == "boolean":
        return st.booleans()
    if t == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if lo is None and hi is None:
            return st.integers(-UNBOUNDED, UNBOUNDED)
        if hi is None:
            hi = lo + UNBOUNDED
        if lo is None:
            lo = hi - UNBOUNDED
        return st.integers(lo, hi)
    if t == "number":
        return st.floats(schema.get("minimum", -1e6), schema.get("maximum", 1e6),
                         allow_nan=False, allow_infinity=False) | st.integers(
            math.ceil(schema.get("minimum", -1000)), math.floor(schema.get("maximum", 1000)))
    if t == "string":
        return st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)),
                       min_size=schema.get("minLength", 0),
                       max_size=min(schema.get("maxLength", 16), 16))
    if t == "array":
        lo = schema.get("minItems", 0)
        hi = min(schema.get("maxItems", lo + 3), lo + 3)
        return st.lists(valid(schema.get("items", {}), depth + 1), min_size=lo, max_size=hi)
    if t == "object":
        return _object(schema, depth)
    return _any(depth)  # {}: any JSON value


def _any(depth: int) -> st.SearchStrategy[Any]:
    leaves = st.none() | st.booleans() | st.integers(-1000, 1000) | _TEXT
    if depth > 2:
        return leaves
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=6)


def _object(schema: Schema, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    props: dict[str, Schema] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    if not props:
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            keys = st.integers(0, 100_000).map(str) if "propertyNames" in schema else _TEXT
            return st.dictionaries(keys, valid(extra, depth + 1),
                                   max_size=min(schema.get("maxProperties", 3), 3))
        return st.dictionaries(_TEXT, _any(depth + 1), max_size=2)
    fixed = {k: valid(s, depth + 1) for k, s in props.items() if k in required}
    optional = {k: valid(s, depth + 1) for k, s in props.items() if k not in required}
    if depth == 0 and optional:  # a body: a few of its optional fields, not all at once
        return st.fixed_dictionaries(fixed).flatmap(
            lambda base: st.lists(st.sampled_from(sorted(optional)), max_size=4, unique=True)
            .flatmap(lambda names: st.fixed_dictionaries(
                {**{k: st.just(v) for k, v in base.items()},
                 **{n: optional[n] for n in names}})))
    return st.fixed_dictionaries(fixed, optional=optional)


# -- wrong values -------------------------------------------------------------------

_CANDIDATES: list[tuple[str, Any]] = [("boolean", True), ("string", "x"), ("number", 1.5),
                                      ("integer", 7), ("array", [1]), ("object", {"k": 1})]


def accepted_types(schema: Schema) -> set[str] | None:
    """The JSON types the schema accepts (None: any)."""
    out: set[str] = set()
    for o in options(schema):
        t = o.get("type")
        if t is None:
            if "const" in o or "enum" in o:
                out.add("string")
                continue
            return None
        out.add(t)
    if "number" in out:
        out.add("integer")
    return out


def wrong(schema: Schema) -> Any:
    """A non-null value of a JSON type ``schema`` does not accept (None: it takes any)."""
    types = accepted_types(schema)
    if types is None:
        return None
    for t, value in _CANDIDATES:
        if t not in types:
            return value
    return None


def wrongs(schema: Schema) -> st.SearchStrategy[Any]:
    types = accepted_types(schema) or set()
    pool = [v for t, v in _CANDIDATES if t not in types]
    pool += [10**30] if "integer" not in types else []
    return st.sampled_from(pool)


def minimal(schema: Schema) -> Any:
    """A small valid value (the first alternative; required fields only)."""
    o = not_null(schema)[0]
    if "const" in o:
        return o["const"]
    if "enum" in o:
        return o["enum"][0]
    t = o.get("type")
    if t == "object":
        return {k: minimal(o["properties"][k]) for k in o.get("required", ())}
    if t == "array":
        return [minimal(o.get("items", {})) for _ in range(max(o.get("minItems", 0), 1))]
    if t == "string":
        return "a" * max(o.get("minLength", 0), 1)
    if t in ("integer", "number"):
        return max(o.get("minimum", 1), 1) if o.get("maximum", 1) >= 1 else o["maximum"]
    if t == "boolean":
        return False
    return None


Probe = tuple[str, Any, str | None]  # (param, body, the enclosing union's param)


def field_paths(schema: Schema, base: Any, param: str = "",
                union: str | None = None) -> Iterator[Probe]:
    """For every field reachable from ``schema`` (objects, the first item of arrays,
    each alternative): ``(param, body, union)``: ``body`` is ``base`` with that field
    set to a value of a wrong type; the gateway must name ``param``, or ``union`` when
    the field lies inside one of several alternatives of the same JSON type (which
    alternative was meant is then unknown)."""
    alts = not_null(schema)
    types = [o.get("type") for o in alts]
    if any(types.count(t) > 1 for t in types):
        union = param
    for o in alts:
        t = o.get("type")
        if t == "object":
            inner = base if isinstance(base, dict) and _fits(o, base) else minimal(o)
            for k, s in o.get("properties", {}).items():
                bad = wrong(s)
                p = f"{param}.{k}" if param else k
                if bad is not None and _tag(s) is None:
                    yield p, _with(inner, k, bad), union
                for sub_p, sub_body, u in field_paths(s, inner.get(k), p, union):
                    yield sub_p, _with(inner, k, sub_body), u
        elif t == "array":
            item = o.get("items", {})
            first = base[0] if isinstance(base, list) and base else minimal(item)
            for sub_p, sub_body, u in field_paths(item, first, f"{param}[0]", union):
                yield sub_p, [sub_body], u


def _tag(s: Schema) -> Any:
    """The one value a field may take (a tagged object's ``type``/``role``), or None."""
    if "const" in s:
        return s["const"]
    enum = s.get("enum")
    return enum[0] if enum is not None and len(enum) == 1 else None


def _fits(o: Schema, value: dict[str, Any]) -> bool:
    return all(value.get(k) == tag for k, s in o.get("properties", {}).items()
               if (tag := _tag(s)) is not None)


def _with(obj: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    return {**obj, key: value}
