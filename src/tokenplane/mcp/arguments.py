"""Argument rules: a tool's argument checked by a regex and / or a JSON Schema subset
before the call leaves the gateway. A failed check is a reason the agent can read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenplane.mcp.globs import GlobSet

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,), "null": (type(None),),
}
SUPPORTED = frozenset({"type", "enum", "const", "minimum", "maximum", "minLength",
                       "maxLength", "pattern", "items", "properties", "required"})


def schema_problem(schema: Mapping[str, Any], where: str = "json_schema") -> str | None:
    """Why ``schema`` is outside the supported subset (None: it is inside)."""
    for k, v in schema.items():
        if k not in SUPPORTED:
            return f"{where}: {k!r} is not supported (use {sorted(SUPPORTED)})"
        if k == "type" and not all(t in _TYPES for t in (v if isinstance(v, list) else [v])):
            return f"{where}.type: {v!r} is not a JSON type"
        if k == "pattern":
            try:
                re.compile(v)
            except (re.error, TypeError):
                return f"{where}.pattern: not a regular expression"
        if k == "items" and isinstance(v, Mapping):
            inner = schema_problem(v, f"{where}.items")
            if inner:
                return inner
        if k == "properties" and isinstance(v, Mapping):
            for name, sub in v.items():
                inner = schema_problem(sub, f"{where}.properties.{name}") \
                    if isinstance(sub, Mapping) else f"{where}.properties.{name}: not a schema"
                if inner:
                    return inner
    return None


def _is(value: Any, type_name: str) -> bool:
    if type_name in ("integer", "number") and isinstance(value, bool):
        return False
    if type_name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[type_name])


def check_schema(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    """The first way ``value`` breaks ``schema`` (None: it conforms)."""
    t = schema.get("type")
    if t is not None:
        names = t if isinstance(t, list) else [t]
        if not any(_is(value, n) for n in names):
            return f"{path} must be of type {' or '.join(names)}"
    if "const" in schema and value != schema["const"]:
        return f"{path} must be {schema['const']!r}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} must be one of {schema['enum']!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path} must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path} must be at most {schema['maximum']}"
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"{path} must have at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path} must have at most {schema['maxLength']} characters"
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            return f"{path} must match {schema['pattern']!r}"
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            bad = check_schema(item, schema["items"], f"{path}[{i}]")
            if bad:
                return bad
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                return f"{path}.{name} is required"
        for name, sub in (schema.get("properties") or {}).items():
            if name in value:
                bad = check_schema(value[name], sub, f"{path}.{name}")
                if bad:
                    return bad
    return None


@dataclass(frozen=True)
class ArgumentRule:
    """``argument`` of the tools ``tools`` matches: present when ``required``, its
    string value matching ``pattern`` from the start, conforming to ``schema``."""

    tools: GlobSet
    argument: str
    pattern: re.Pattern[str] | None = None
    schema: Mapping[str, Any] | None = None
    required: bool = False
    source: str = ""  # the rule as configured, named in the reason

    def check(self, arguments: Mapping[str, Any]) -> str | None:
        name = self.argument
        if name not in arguments:
            return f"argument {name!r} is required" if self.required else None
        value = arguments[name]
        if self.pattern is not None:
            if not isinstance(value, str):
                return f"argument {name!r} must be a string"
            if self.pattern.match(value) is None:
                return f"argument {name!r} must match {self.pattern.pattern!r}"
            if _escapes(value):
                return f"argument {name!r} may not hold '..' path segments"
        if self.schema is not None:
            return check_schema(value, self.schema, f"argument {name!r}")
        return None


def _escapes(value: str) -> bool:
    """A path that climbs out with ``..`` would pass a prefix pattern it escapes."""
    return ".." in re.split(r"[/\\]", value)
