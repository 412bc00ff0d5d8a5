"""JSON values that validate against a JSON Schema, drawn from a seeded RNG: what the
simulated engine answers for ``response_format: json_schema`` and as tool-call
arguments.

Covered (what OpenAI's strict mode, pydantic and LangChain emit): ``type`` (a name or a
list: the first non-null one), ``properties`` / ``required`` (every required property;
an optional one half of the time), ``additionalProperties`` (never used), arrays with
``items`` / ``prefixItems`` and ``minItems`` / ``maxItems`` / ``uniqueItems``, ``enum``
and ``const``, strings with ``minLength`` / ``maxLength`` and the ``format``s date-time,
date, time, email, uri / url, uuid, ipv4, ipv6 and hostname, integers and numbers with
``minimum`` / ``maximum``, exclusive bounds and ``multipleOf``, booleans, null, nesting,
``anyOf`` / ``oneOf`` (the first branch), ``allOf`` (the branches merged), and local
``$ref`` into ``$defs`` / ``definitions`` (or ``#``). A recursive schema stops growing
after :data:`MAX_DEPTH` levels: deeper down optional properties are left out and arrays
take their minimum. ``pattern`` is not honoured (a string pattern needs a regex
generator; none of the shapes above use one). Schemas are checked beforehand
(``operations/json_schema.py``).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from tokenplane.operations.json_schema import resolve_ref

MAX_DEPTH = 6
HARD_DEPTH = 24  # a schema that requires deeper nesting gets null there (none is finite)
MAX_NODES = 2000  # past this many values, every array takes its minimum
MAX_ITEMS = 64  # minItems / minProperties / maxItems beyond this are capped
MAX_CHARS = 2048  # minLength beyond this is capped
_WORDS = ("alpha", "bravo", "delta", "river", "stone", "cloud", "maple", "orbit", "pixel",
          "harbor", "silver", "garden", "signal", "copper", "meadow", "falcon")
_TLDS = ("com", "org", "net", "io")


class InstanceGenerator:
    """``generate(schema)``: one value for the schema, drawn from ``rng``."""

    __slots__ = ("_nodes", "_rng", "_root")

    def __init__(self, schema: Any, rng: random.Random) -> None:
        self._root = schema if isinstance(schema, Mapping) else {}
        self._rng = rng
        self._nodes = 0

    def generate(self) -> Any:
        return self._value(self._root, 0)

    # --- dispatch ------------------------------------------------------------------
    def _value(self, node: Any, depth: int) -> Any:
        self._nodes += 1
        if depth > HARD_DEPTH:
            return None
        if node is True or node is None:
            return self._words(1, 2)
        if node is False or not isinstance(node, Mapping):
            return None
        node = self._merged(node, depth)
        if "const" in node:
            return node["const"]
        enum = node.get("enum")
        if isinstance(enum, list) and enum:
            return self._rng.choice(enum)
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list) and branches:
                return self._value(branches[0], depth + 1)
        t = self._type(node)
        if t == "object":
            return self._object(node, depth)
        if t == "array":
            return self._array(node, depth)
        if t == "string":
            return self._string(node)
        if t == "integer":
            return self._integer(node)
        if t == "number":
            return self._number(node)
        if t == "boolean":
            return self._rng.random() < 0.5
        return None

    def _merged(self, node: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
        """``$ref`` resolved and ``allOf`` folded into one mapping (the node's own
        keywords win over the referenced ones, as pydantic's description-with-$ref)."""
        if depth > HARD_DEPTH:
            return {}
        for _ in range(32):
            ref = node.get("$ref")
            all_of = node.get("allOf")
            if not isinstance(ref, str) and not isinstance(all_of, list):
                return node
            merged: dict[str, Any] = {}
            if isinstance(ref, str):
                target = resolve_ref(self._root, ref)
                if isinstance(target, Mapping):
                    merged.update(target)
            if isinstance(all_of, list):
                for part in all_of:
                    if isinstance(part, Mapping):
                        part = self._merged(part, depth + 1)
                        _merge_into(merged, part)
            own = {k: v for k, v in node.items() if k not in ("$ref", "allOf")}
            _merge_into(merged, own)
            node = merged
        return node

    @staticmethod
    def _type(node: Mapping[str, Any]) -> str | None:
        t = node.get("type")
        if isinstance(t, list):
            names = [x for x in t if x != "null"]
            return names[0] if names else "null"
        if isinstance(t, str):
            return t
        if "properties" in node or "required" in node:
            return "object"
        if "items" in node or "prefixItems" in node:
            return "array"
        if "minimum" in node or "maximum" in node:
            return "number"
        if "minLength" in node or "maxLength" in node or "format" in node:
            return "string"
        return "string" if not node else None

    # --- objects and arrays --------------------------------------------------------
    def _object(self, node: Mapping[str, Any], depth: int) -> dict[str, Any]:
        props = node.get("properties")
        props = props if isinstance(props, Mapping) else {}
        required = node.get("required")
        need = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if name in need or (depth < MAX_DEPTH and self._nodes < MAX_NODES
                                and self._rng.random() < 0.5):
                out[name] = self._value(sub, depth + 1)
        for name in sorted(need - out.keys()):  # required but not described
            out[name] = self._words(1, 2)
        lo = _num(node.get("minProperties"), None)
        extra = node.get("additionalProperties")
        i = 0
        while lo is not None and len(out) < min(lo, MAX_ITEMS) and extra is not False:
            out[f"field_{i}"] = self._value(extra if isinstance(extra, Mapping) else True,
                                            depth + 1)
            i += 1
        return out

    def _array(self, node: Mapping[str, Any], depth: int) -> list[Any]:
        lo = _num(node.get("minItems"), None)
        hi = _num(node.get("maxItems"), None)
        low = min(int(lo), MAX_ITEMS) if lo is not None else 0
        prefix = node.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        if depth >= MAX_DEPTH or self._nodes >= MAX_NODES:
            count = max(low, 0)
        else:
            high = min(int(hi), max(low, 1) + 4) if hi is not None else max(low, 1) + 2
            count = self._rng.randint(max(low, min(1, high)), max(high, low))
        items = node.get("items")
        out: list[Any] = []
        unique = node.get("uniqueItems") is True
        seen: list[Any] = []
        attempts = 0
        while len(out) < count and attempts < count * 8 + 8:
            attempts += 1
            i = len(out)
            sub = prefix[i] if i < len(prefix) else items
            v = self._value(sub if sub is not None else True, depth + 1)
            if unique and v in seen:
                continue
            seen.append(v)
            out.append(v)
        return out

    # --- scalars -------------------------------------------------------------------
    def _string(self, node: Mapping[str, Any]) -> str:
        fmt = node.get("format")
        text = self._formatted(fmt) if isinstance(fmt, str) else None
        if text is None:
            text = self._words(1, 4)
        lo = _num(node.get("minLength"), None)
        hi = _num(node.get("maxLength"), None)
        if lo is not None and len(text) < lo:
            want = min(int(-(-lo // 1)), MAX_CHARS)
            text = (text + " " + "x" * want)[:want]
        if hi is not None and len(text) > hi:
            text = text[: int(hi)]
        return text

    def _formatted(self, fmt: str) -> str | None:
        r = self._rng
        if fmt == "date-time":
            return (f"20{r.randint(10, 35)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
                    f"T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z")
        if fmt == "date":
            return f"20{r.randint(10, 35)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
        if fmt == "time":
            return f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z"
        if fmt == "email":
            return f"{r.choice(_WORDS)}.{r.choice(_WORDS)}@example.{r.choice(_TLDS)}"
        if fmt in ("uri", "url", "iri", "uri-reference"):
            return f"https://example.{r.choice(_TLDS)}/{r.choice(_WORDS)}/{r.randint(1, 999)}"
        if fmt == "uuid":
            return str(uuid.UUID(int=r.getrandbits(128), version=4))
        if fmt == "ipv4":
            return ".".join(str(r.randint(1, 254)) for _ in range(4))
        if fmt == "ipv6":
            return ":".join(f"{r.randint(0, 0xFFFF):x}" for _ in range(8))
        if fmt in ("hostname", "idn-hostname"):
            return f"{r.choice(_WORDS)}.example.{r.choice(_TLDS)}"
        return None

    def _words(self, low: int, high: int) -> str:
        r = self._rng
        return " ".join(r.choice(_WORDS) for _ in range(r.randint(low, high)))

    def _integer(self, node: Mapping[str, Any]) -> int:
        lo, hi = _int_bounds(node)
        mult = _num(node.get("multipleOf"), None)
        if mult is not None and mult > 0 and mult.is_integer():
            m = int(mult)
            first = -(-lo // m)
            last = hi // m
            if first <= last:
                return self._rng.randint(first, last) * m
        return self._rng.randint(lo, hi)

    def _number(self, node: Mapping[str, Any]) -> float:
        lo = _num(node.get("minimum"), _num(node.get("exclusiveMinimum"), None))
        hi = _num(node.get("maximum"), _num(node.get("exclusiveMaximum"), None))
        low = lo if lo is not None else (hi - 100.0 if hi is not None else 0.0)
        high = hi if hi is not None else low + 100.0
        span = high - low
        v = low + span * (0.1 + 0.8 * self._rng.random()) if span > 0 else low
        v = round(v, 2)
        if not low <= v <= high:
            v = (low + high) / 2
        if node.get("exclusiveMinimum") is not None and v <= low:
            v = (low + high) / 2
        return v


def _merge_into(out: dict[str, Any], part: Mapping[str, Any]) -> None:
    for k, v in part.items():
        if k == "properties" and isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = {**out[k], **v}
        elif k == "required" and isinstance(v, Sequence) and isinstance(out.get(k), list):
            out[k] = [*out[k], *[x for x in v if x not in out[k]]]
        else:
            out[k] = v


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _num(v: Any, default: float | None) -> float | None:
    return float(v) if _is_num(v) else default


def _int_bounds(node: Mapping[str, Any]) -> tuple[int, int]:
    lo: int | None = None
    hi: int | None = None
    if _is_num(node.get("minimum")):
        lo = int(-(-node["minimum"] // 1))
    if _is_num(node.get("exclusiveMinimum")):
        x = int(node["exclusiveMinimum"] // 1) + 1
        lo = x if lo is None else max(lo, x)
    if _is_num(node.get("maximum")):
        hi = int(node["maximum"] // 1)
    if _is_num(node.get("exclusiveMaximum")):
        x = int(-(-node["exclusiveMaximum"] // 1)) - 1
        hi = x if hi is None else min(hi, x)
    if lo is None:
        lo = 0 if hi is None or hi >= 0 else hi - 100
    if hi is None:
        hi = lo + 100
    return (lo, hi) if lo <= hi else (lo, lo)


def instance(schema: Any, rng: random.Random) -> Any:
    """One value validating against ``schema``."""
    return InstanceGenerator(schema, rng).generate()


def json_object(rng: random.Random, words: Sequence[str]) -> dict[str, Any]:
    """A value for ``response_format: json_object`` (no schema): an answer and a few
    fields, the answer made of ``words``."""
    return {"answer": " ".join(w.strip() for w in words), "confidence": round(rng.random(), 2),
            "topics": [rng.choice(_WORDS) for _ in range(rng.randint(1, 3))]}
