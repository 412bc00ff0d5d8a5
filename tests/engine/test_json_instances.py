"""Values drawn from JSON Schemas validate against them (checked by ``jsonschema``, not
by our generator); the stop cut; multi-byte text split across tokens stays exact."""

from __future__ import annotations

import random
from typing import Any, Literal

import jsonschema
import orjson
import pytest
from pydantic import BaseModel, Field

from tokenplane.engine.behaviour import SimBehaviour
from tokenplane.engine.json_instances import instance
from tokenplane.engine.planning import Planner, apply_stop
from tokenplane.engine.sampling import Sampling
from tokenplane.engine.textgen import WordPool
from tokenplane.tokens.base import Tokenizer


class Node(BaseModel):
    """Recursive, as pydantic emits it ($ref to itself)."""

    label: str
    children: list[Node] = Field(default_factory=list)


class Line(BaseModel):
    sku: str = Field(pattern=None, min_length=4, max_length=12)
    qty: int = Field(ge=1, le=5)
    unit_price: float = Field(gt=0, le=99.5)


class Order(BaseModel):
    id: int = Field(multiple_of=5, ge=10, le=1000)
    lines: list[Line] = Field(min_length=1, max_length=3)
    status: Literal["new", "paid"]
    note: str | None = None
    tree: Node | None = None
    meta: dict[str, int] = Field(default_factory=dict)


SCHEMAS: list[Any] = [
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {"type": "array", "items": {"type": "integer", "exclusiveMinimum": 3,
                                "exclusiveMaximum": 6}, "minItems": 2, "maxItems": 5},
    {"type": "array", "items": {"enum": [1, 2, 3]}, "minItems": 3, "maxItems": 3,
     "uniqueItems": True},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}],
     "minItems": 2, "maxItems": 2},
    {"type": ["null", "number"], "minimum": -1.5, "maximum": -1.25},
    {"type": "string", "minLength": 30},
    {"type": "string", "maxLength": 3},
    {"const": {"fixed": True}},
    {"oneOf": [{"type": "string", "format": "email"}, {"type": "integer"}]},
    {"allOf": [{"type": "object", "properties": {"x": {"type": "integer"}},
                "required": ["x"]},
               {"properties": {"y": {"type": "string", "format": "uuid"}}, "required": ["y"]}]},
    {"type": "object", "properties": {f: {"type": "string", "format": f} for f in (
        "date-time", "date", "time", "email", "uri", "uuid", "ipv4", "ipv6", "hostname")},
     "required": ["date-time", "date", "time", "email", "uri", "uuid", "ipv4", "ipv6",
                  "hostname"]},
    {"type": "object", "minProperties": 2, "additionalProperties": {"type": "integer"}},
    {"definitions": {"P": {"type": "object", "properties": {"n": {"type": "integer"}},
                           "required": ["n"]}},
     "type": "object", "properties": {"p": {"$ref": "#/definitions/P"}}, "required": ["p"]},
    {"type": "object", "properties": {"name": {"enum": ["北京", "東京", "Zürich"]},
                                      "text": {"type": "string"}},
     "required": ["name", "text"]},
    True,
    {},
    Order.model_json_schema(),
    Node.model_json_schema(),
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=[str(i) for i in range(len(SCHEMAS))])
def test_instances_validate(schema: Any) -> None:
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    for seed in range(60):
        value = instance(schema, random.Random(seed))
        jsonschema.Draft202012Validator(schema, format_checker=checker).validate(value)
        orjson.dumps(value)


def test_recursive_schema_terminates() -> None:
    schema = Node.model_json_schema()
    depths = []
    for seed in range(50):
        value = instance(schema, random.Random(seed))

        def depth(n: dict[str, Any]) -> int:
            return 1 + max((depth(c) for c in n.get("children", [])), default=0)

        depths.append(depth(value))
    assert max(depths) <= 10 and max(depths) > 1


def test_apply_stop_cuts_before_the_earliest_stop() -> None:
    pieces = [" one", " two", "\n", "\n", " three"]
    end = apply_stop(pieces, 0, 5, ["\n\n", "three"])
    assert end == 4 and "".join(pieces[:end]) == " one two"
    pieces = [" alpha", " bra", "vo"]
    assert apply_stop(pieces, 0, 3, ["rav"]) == 3  # a stop split across tokens
    assert "".join(pieces) == " alpha b"
    assert apply_stop([" a", " b"], 0, 2, ["zz"]) is None


def test_multibyte_json_is_exact(tokenizer: Tokenizer) -> None:
    pool = WordPool(tokenizer)
    words = {i: tokenizer.decode([i]) for i in pool.ids}
    planner = Planner(tokenizer, pool, words, "m", SimBehaviour())
    schema = {"type": "object", "properties": {"city": {"enum": ["北京市", "Zürich", "東京都"]}},
              "required": ["city"]}
    s = Sampling(json_mode="schema", schema=schema)
    for seed in range(20):
        ids = tokenizer.encode(f"where {seed}")
        (plan,) = planner.plan(ids, s, None, 1000, None, {})
        text = plan.content()
        assert orjson.loads(text)["city"] in ("北京市", "Zürich", "東京都")
        assert len(plan.pieces) == tokenizer.count(text)


HOSTILE: list[Any] = [
    {"$defs": {"N": {"type": "object", "properties": {"c": {"$ref": "#/$defs/N"}},
                     "required": ["c"]}}, "$ref": "#/$defs/N"},
    {"type": "array", "minItems": 10**9},
    {"type": "array", "maxItems": 10**6, "items": {"type": "array", "maxItems": 10**6,
                                                    "items": {"type": "array"}}},
    {"type": "string", "minLength": 10**9},
    {"type": "object", "minProperties": 10**9},
    {"$ref": "#"},
    {"allOf": [{"$ref": "#"}]},
    {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"},
]


@pytest.mark.parametrize("schema", HOSTILE, ids=[str(i) for i in range(len(HOSTILE))])
def test_hostile_schemas_stay_bounded(schema: Any) -> None:
    """Schemas no finite or sane value satisfies give a bounded value, never a crash."""
    value = instance(schema, random.Random(1))
    assert len(orjson.dumps(value)) < 200_000
