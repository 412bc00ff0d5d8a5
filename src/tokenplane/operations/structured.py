"""Rules between a chat body's structured-output and tool fields, after their types
are checked (``operations/schemas.py``): the gateway (``operations/chat.py``) and the
simulated engine (``engine/validation.py``) apply the same ones.

* ``response_format.json_schema.schema`` and each tool's ``function.parameters`` must
  be usable JSON Schemas (``operations/json_schema.py``);
* tool names are unique;
* ``tool_choice`` ``required`` or a named tool needs ``tools``, and a named tool must
  be one of them.
"""

from __future__ import annotations

from typing import Any

from tokenplane.errors import invalid
from tokenplane.operations.json_schema import check_schema


def tool_names(body: dict[str, Any]) -> list[str]:
    """The function names of ``tools`` (types already checked)."""
    out: list[str] = []
    for t in body.get("tools") or ():
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out.append(fn["name"])
    return out


def check_structured(body: dict[str, Any]) -> None:
    """400 for a bad schema, a duplicate tool or a ``tool_choice`` naming no tool."""
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        js = rf.get("json_schema")
        schema = js.get("schema") if isinstance(js, dict) else None
        if schema is not None:
            check_schema(schema, "response_format.json_schema.schema")
    tools = body.get("tools") or ()
    names: set[str] = set()
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict):
            continue
        name = fn.get("name")
        if name in names:
            raise invalid(f"'tools[{i}].function.name' repeats the tool {name!r}",
                          param=f"tools[{i}].function.name", code="invalid_value")
        if isinstance(name, str):
            names.add(name)
        params = fn.get("parameters")
        if params is not None:
            check_schema(params, f"tools[{i}].function.parameters")
    choice = body.get("tool_choice")
    if choice is None or choice in ("none", "auto"):
        return
    if not names:
        raise invalid("'tool_choice' is only allowed when 'tools' are specified",
                      param="tool_choice", code="invalid_value")
    if isinstance(choice, dict):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        if name not in names:
            raise invalid(f"'tool_choice.function.name' names the tool {name!r}, which is "
                          f"not in 'tools' ({', '.join(sorted(names))})",
                          param="tool_choice.function.name", code="invalid_value")
