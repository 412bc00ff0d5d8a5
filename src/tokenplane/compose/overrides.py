"""``serve --set key=value``: single settings changed on the loaded config's data
before it is validated, so an override is checked exactly as the same value in the
file would be.

The key is a dotted path into the YAML (``server.port``, ``observe.metrics.listen``,
``models.0.backends.0.replicas``: a number indexes a list); the value is read as a
YAML scalar or flow collection (``8081`` an integer, ``null`` nothing, ``[a, b]`` a
list, ``'8081'`` a string). A missing mapping on the way is created; a missing list
item is not (the path says which).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml


class OverrideError(ValueError):
    """A ``--set`` that cannot apply; the message says which and why."""


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"a.b=1"`` -> (["a", "b"], 1)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise OverrideError(f"--set {text!r}: expected KEY=VALUE (for example "
                            "server.port=8081)")
    parts = key.split(".")
    if any(not p for p in parts):
        raise OverrideError(f"--set {text!r}: {key!r} has an empty part")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        raise OverrideError(f"--set {text!r}: the value is not valid YAML (quote it)") from None
    return parts, value


def apply_overrides(data: Any, overrides: Sequence[str]) -> Any:
    """``data`` with every override applied, in order (later ones win)."""
    for text in overrides:
        parts, value = parse_override(text)
        if not isinstance(data, dict):
            raise OverrideError(f"--set {text!r}: the config is not a mapping")
        node: Any = data
        for i, part in enumerate(parts[:-1]):
            node = _step(node, part, text, ".".join(parts[:i + 1]))
        _assign(node, parts[-1], value, text)
    return data


def _step(node: Any, part: str, text: str, where: str) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, text, where)]
    if not isinstance(node, dict):
        raise OverrideError(f"--set {text!r}: {where} is not a mapping or list")
    child = node.get(part)
    if child is None:
        child = node[part] = {}
    return child


def _assign(node: Any, part: str, value: Any, text: str) -> None:
    if isinstance(node, list):
        node[_index(node, part, text, part)] = value
    elif isinstance(node, dict):
        node[part] = value
    else:
        raise OverrideError(f"--set {text!r}: cannot set {part!r} inside a "
                            f"{type(node).__name__}")


def _index(node: list[Any], part: str, text: str, where: str) -> int:
    if not part.isdigit():
        raise OverrideError(f"--set {text!r}: {where}: a list is indexed by a number")
    i = int(part)
    if i >= len(node):
        raise OverrideError(f"--set {text!r}: {where}: the list has {len(node)} item(s)")
    return i
