"""Field specs: one object per JSON field that both checks a value and describes it.

A request body's shape is written once as a tree of specs (``operations/schemas.py``
holds the OpenAI bodies). ``spec.check(value, param)`` raises OpenAI's 400
(``invalid_request_error``) naming the field path (``messages[2].content[0].image_url``);
``spec.schema()`` gives the same rules as JSON Schema (draft 2020-12, as OpenAPI 3.1
uses it), so the published document (``GET /openapi.json``) cannot drift from what the
gateway accepts.

Codes: ``invalid_type`` (wrong JSON type), ``invalid_value`` (out of range, not one of
the allowed values, too many or too few items), ``missing_required``, and
``unknown_parameter`` (an object that allows no other fields). A JSON ``true`` is never
an integer or a number. In an object, an optional field that is ``null`` counts as
absent (as OpenAI treats it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokenplane.errors import GatewayError, invalid

JsonSchema = dict[str, Any]

_TYPE_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string",
               list: "array", dict: "object"}


def type_name(v: Any) -> str:
    """The JSON type of a parsed JSON value, as a message says it."""
    if v is None:
        return "null"
    return _TYPE_NAMES.get(type(v), type(v).__name__)


class Bad(Exception):
    """A value failed its spec. The path is collected on the way out (innermost
    segment first: ``.name``, ``[i]``), so a value that passes costs no string work."""

    def __init__(self, what: str, code: str) -> None:
        super().__init__(what)
        self.what = what  # the message after the field's path
        self.code = code
        self.path: list[str] = []

    def at(self, segment: str) -> Bad:
        self.path.append(segment)
        return self

    def param(self, root: str = "") -> str:
        tail = "".join(reversed(self.path))
        return root + tail if root else tail.removeprefix(".")

    def error(self, root: str = "") -> GatewayError:
        p = self.param(root)
        return invalid(f"'{p}' {self.what}", param=p, code=self.code)


def wrong_type(label: str, v: Any) -> Bad:
    return Bad(f"must be {label}, got {type_name(v)}", "invalid_type")


def bad_value(what: str) -> Bad:
    return Bad(what, "invalid_value")


class Spec:
    """One JSON field's rules. ``label`` says what is expected in a message."""

    __slots__ = ("description",)
    label = "a value"
    json_type = ""  # the JSON type this spec accepts ("" when more than one)

    def __init__(self, description: str = "") -> None:
        self.description = description

    def check(self, v: Any, param: str = "") -> None:
        """Raise OpenAI's 400 naming ``param`` (or the path below it) unless ``v`` fits."""
        try:
            self.verify(v)
        except Bad as bad:
            raise bad.error(param) from None

    def verify(self, v: Any) -> None:
        """Raise :class:`Bad` unless ``v`` fits."""
        raise NotImplementedError

    def schema(self) -> JsonSchema:
        raise NotImplementedError

    def _doc(self, out: JsonSchema) -> JsonSchema:
        if self.description:
            out["description"] = self.description
        return out


class Bool(Spec):
    __slots__ = ()
    label = "a boolean"
    json_type = "boolean"

    def verify(self, v: Any) -> None:
        if v is not True and v is not False:
            raise wrong_type(self.label, v)

    def schema(self) -> JsonSchema:
        return self._doc({"type": "boolean"})


def _bounds(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"must be between {lo} and {hi}"
    return f"must be at least {lo}" if lo is not None else f"must be at most {hi}"


class Int(Spec):
    """An integer (never a boolean; ``1.0`` is not an integer either) within bounds."""

    __slots__ = ("hi", "lo")
    label = "an integer"
    json_type = "integer"

    def __init__(self, lo: int | None = None, hi: int | None = None,
                 description: str = "") -> None:
        super().__init__(description)
        self.lo, self.hi = lo, hi

    def verify(self, v: Any) -> None:
        if type(v) is not int:
            raise wrong_type(self.label, v)
        if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            raise bad_value(f"{_bounds(self.lo, self.hi)}, got {v}")

    def schema(self) -> JsonSchema:
        out: JsonSchema = {"type": "integer"}
        if self.lo is not None:
            out["minimum"] = self.lo
        if self.hi is not None:
            out["maximum"] = self.hi
        return self._doc(out)


class Num(Spec):
    """A number (an integer or a float, never a boolean) within bounds."""

    __slots__ = ("hi", "lo")
    label = "a number"
    json_type = "number"

    def __init__(self, lo: float | None = None, hi: float | None = None,
                 description: str = "") -> None:
        super().__init__(description)
        self.lo, self.hi = lo, hi

    def verify(self, v: Any) -> None:
        t = type(v)
        if t is not float and t is not int:
            raise wrong_type(self.label, v)
        if (self.lo is not None and not v >= self.lo) or (self.hi is not None and not v <= self.hi):
            raise bad_value(f"{_bounds(self.lo, self.hi)}, got {v}")

    def schema(self) -> JsonSchema:
        out: JsonSchema = {"type": "number"}
        if self.lo is not None:
            out["minimum"] = self.lo
        if self.hi is not None:
            out["maximum"] = self.hi
        return self._doc(out)


class Str(Spec):
    __slots__ = ("max_len", "min_len")
    label = "a string"
    json_type = "string"

    def __init__(self, min_len: int = 0, max_len: int | None = None,
                 description: str = "") -> None:
        super().__init__(description)
        self.min_len, self.max_len = min_len, max_len

    def verify(self, v: Any) -> None:
        if type(v) is not str:
            raise wrong_type(self.label, v)
        if len(v) < self.min_len:
            raise bad_value("must not be empty" if self.min_len == 1
                            else f"must be at least {self.min_len} characters long")
        if self.max_len is not None and len(v) > self.max_len:
            raise bad_value(f"must be at most {self.max_len} characters long")

    def schema(self) -> JsonSchema:
        out: JsonSchema = {"type": "string"}
        if self.min_len:
            out["minLength"] = self.min_len
        if self.max_len is not None:
            out["maxLength"] = self.max_len
        return self._doc(out)


class Enum(Spec):
    """One of a few strings."""

    __slots__ = ("_order", "values")
    json_type = "string"

    def __init__(self, *values: str, description: str = "") -> None:
        super().__init__(description)
        self.values = frozenset(values)
        self._order = values

    @property
    def label(self) -> str:  # type: ignore[override]
        return "one of " + ", ".join(repr(v) for v in self._order)

    def verify(self, v: Any) -> None:
        if type(v) is not str:
            raise wrong_type(self.label, v)
        if v not in self.values:
            raise bad_value(f"must be {self.label}, got {v[:64]!r}")

    def schema(self) -> JsonSchema:
        return self._doc({"type": "string", "enum": list(self._order)})


class Arr(Spec):
    __slots__ = ("item", "max_items", "min_items")
    json_type = "array"

    def __init__(self, item: Spec, min_items: int = 0, max_items: int | None = None,
                 description: str = "") -> None:
        super().__init__(description)
        self.item, self.min_items, self.max_items = item, min_items, max_items

    @property
    def label(self) -> str:  # type: ignore[override]
        return f"an array of {_plural(self.item.label)}"

    def verify(self, v: Any) -> None:
        if type(v) is not list:
            raise wrong_type(self.label, v)
        n = len(v)
        if n < self.min_items:
            raise bad_value("must not be empty" if self.min_items == 1
                            else f"must have at least {self.min_items} items")
        if self.max_items is not None and n > self.max_items:
            raise bad_value(f"must have at most {self.max_items} items, got {n}")
        verify = self.item.verify
        i = 0
        try:
            for i, x in enumerate(v):  # noqa: B007 (i names the item that failed)
                verify(x)
        except Bad as bad:
            raise bad.at(f"[{i}]") from None

    def schema(self) -> JsonSchema:
        out: JsonSchema = {"type": "array", "items": self.item.schema()}
        if self.min_items:
            out["minItems"] = self.min_items
        if self.max_items is not None:
            out["maxItems"] = self.max_items
        return self._doc(out)


def _plural(label: str) -> str:
    for article in ("an ", "a "):
        if label.startswith(article):
            return label[len(article):] + "s"
    return label


class Map(Spec):
    """An object whose keys are free (``digits``: token ids as strings) and whose values
    all follow one spec."""

    __slots__ = ("digits", "max_items", "value")
    label = "an object"
    json_type = "object"

    def __init__(self, value: Spec, *, digits: bool = False, max_items: int | None = None,
                 description: str = "") -> None:
        super().__init__(description)
        self.value, self.digits, self.max_items = value, digits, max_items

    def verify(self, v: Any) -> None:
        if type(v) is not dict:
            raise wrong_type(self.label, v)
        if self.max_items is not None and len(v) > self.max_items:
            raise bad_value(f"must have at most {self.max_items} entries")
        verify = self.value.verify
        for k, x in v.items():
            if self.digits and not (k.isascii() and k.isdigit()):
                raise bad_value("must be a token id (a string of digits) mapped to a "
                                "bias").at(f".{k}")
            try:
                verify(x)
            except Bad as bad:
                raise bad.at(f".{k}") from None

    def schema(self) -> JsonSchema:
        out: JsonSchema = {"type": "object", "additionalProperties": self.value.schema()}
        if self.digits:
            out["propertyNames"] = {"pattern": "^[0-9]+$"}
        if self.max_items is not None:
            out["maxProperties"] = self.max_items
        return self._doc(out)


class Obj(Spec):
    """An object with known fields. ``extra``: whether other fields pass (unchecked).
    An optional field that is ``null`` counts as absent."""

    __slots__ = ("_entries", "extra", "fields", "required")
    label = "an object"
    json_type = "object"

    def __init__(self, fields: Mapping[str, Spec], required: tuple[str, ...] = (), *,
                 extra: bool = True, description: str = "") -> None:
        super().__init__(description)
        self.fields = dict(fields)
        self.required = required
        self.extra = extra
        self._entries: dict[str, tuple[Spec, type | None]] = {}
        self.compile()

    def compile(self, known: Mapping[str, type] | None = None) -> None:
        """Indexes the fields with the JSON type that alone makes a value right (a
        string without limits, a boolean: the common case costs no call); ``known``:
        fields already checked by whoever holds this object (a tag)."""
        self._entries = {name: (spec, (known or {}).get(name) or plain_type(spec))
                         for name, spec in self.fields.items()}

    def verify(self, v: Any) -> None:
        if type(v) is not dict:
            raise wrong_type(self.label, v)
        self.verify_fields(v)

    def verify_fields(self, v: dict[str, Any]) -> None:
        """The fields of ``v`` (known to be an object)."""
        for name in self.required:
            if v.get(name) is None:
                if name in v:
                    try:
                        self.fields[name].verify(None)  # says what it must be
                    except Bad as bad:
                        raise bad.at(f".{name}") from None
                raise Bad("is a required property", "missing_required").at(f".{name}")
        entries = self._entries
        for name, x in v.items():
            entry = entries.get(name)
            if entry is None:
                if not self.extra:
                    raise Bad("is not a known parameter", "unknown_parameter").at(f".{name}")
            elif x is not None and type(x) is not entry[1]:
                try:
                    entry[0].verify(x)
                except Bad as bad:
                    raise bad.at(f".{name}") from None

    def schema(self) -> JsonSchema:
        props: JsonSchema = {}
        for name, spec in self.fields.items():
            s = spec.schema()
            props[name] = s if name in self.required else nullable(s)
        out: JsonSchema = {"type": "object", "properties": props}
        if self.required:
            out["required"] = list(self.required)
        if not self.extra:
            out["additionalProperties"] = False
        return self._doc(out)


def nullable(s: JsonSchema) -> JsonSchema:
    return {"anyOf": [s, {"type": "null"}]}


def plain_type(spec: Spec) -> type | None:
    """The Python type whose every value ``spec`` accepts, if there is one."""
    if isinstance(spec, Bool):
        return bool
    if isinstance(spec, Str) and spec.min_len == 0 and spec.max_len is None:
        return str
    if isinstance(spec, Int) and spec.lo is None and spec.hi is None:
        return int
    if isinstance(spec, OneOf):
        fits = spec._by_type.get(str, ())
        if len(fits) == 1 and plain_type(fits[0]) is str:
            return str
    return None


class OneOf(Spec):
    """One of a few specs. The value's JSON type picks the candidates (the first whose
    ``json_type`` fits, or every spec without one); when several fit, the first that
    passes wins, else the error that names the deepest field."""

    __slots__ = ("_by_type", "_label", "options")
    json_type = ""

    def __init__(self, *options: Spec, label: str = "", description: str = "") -> None:
        super().__init__(description)
        self.options = options
        self._label = label or " or ".join(o.label for o in options)
        self._by_type: dict[type, tuple[Spec, ...]] = {}
        for t in (bool, int, float, str, list, dict, type(None)):
            jt = _json_type(t)
            self._by_type[t] = tuple(o for o in options if not o.json_type or o.json_type == jt
                                     or (o.json_type == "number" and jt == "integer"))

    @property
    def label(self) -> str:  # type: ignore[override]
        return self._label

    def verify(self, v: Any) -> None:
        fits = self._by_type.get(type(v), ())
        if len(fits) == 1:
            fits[0].verify(v)
            return
        if not fits:
            raise wrong_type(self.label, v)
        errors: list[Bad] = []
        for o in fits:
            try:
                o.verify(v)
                return
            except Bad as bad:
                errors.append(bad)
        # the option that got furthest says what is wrong; when none did, say what fits
        top = max(errors, key=lambda e: (len(e.param()), e.param()))
        if len({e.what for e in errors if e.param() == top.param()}) > 1:
            raise Bad(f"must be {self.label}", "invalid_type")
        raise top

    def schema(self) -> JsonSchema:
        return self._doc({"anyOf": [o.schema() for o in self.options]})


def _json_type(t: type) -> str:
    return _TYPE_NAMES.get(t, "null")


class Tagged(Spec):
    """An object whose ``tag`` field (``type``, ``role``) picks its shape."""

    __slots__ = ("tag", "variants")
    label = "an object"
    json_type = "object"

    def __init__(self, tag: str, variants: Mapping[str, Obj], description: str = "") -> None:
        super().__init__(description)
        self.tag = tag
        self.variants = dict(variants)
        for kind, variant in self.variants.items():
            variant.fields = {tag: Enum(kind), **variant.fields}
            variant.required = (tag, *variant.required)
            variant.compile({tag: str})  # checked here before the variant is picked

    def verify(self, v: Any) -> None:
        if type(v) is not dict:
            raise wrong_type(self.label, v)
        kind = v.get(self.tag)
        variant = self.variants.get(kind) if type(kind) is str else None
        if variant is None:
            allowed = ", ".join(repr(k) for k in self.variants)
            if kind is None:
                raise Bad(f"is a required property (one of {allowed})",
                          "missing_required").at(f".{self.tag}")
            shown = repr(kind[:64]) if type(kind) is str else type_name(kind)
            raise Bad(f"must be one of {allowed}, got {shown}",
                      "invalid_value" if type(kind) is str else "invalid_type").at(f".{self.tag}")
        variant.verify_fields(v)

    def schema(self) -> JsonSchema:
        options = []
        for kind, variant in self.variants.items():
            s = variant.schema()
            s["title"] = kind
            options.append(s)
        return self._doc({"oneOf": options})
