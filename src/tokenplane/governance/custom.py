"""Recognizers built from configuration: custom regular expressions and word lists.

A spec is a plain dict, e.g.::

    {"type": "regex", "name": "employee_id", "entity_type": "EMPLOYEE_ID",
     "pattern": "EMP-[0-9]{6}", "score": 0.8, "context": ["工号"], "context_score": 0.95}
    {"type": "words", "name": "projects", "entity_type": "PROJECT_NAME",
     "words": ["Bluebird", "青鸟计划"], "case_sensitive": false, "score": 0.9}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tokenplane.governance.pattern import PatternRecognizer, compile_pattern


class RecognizerSpecError(ValueError):
    """A custom recognizer spec is malformed."""


def _str(spec: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = spec.get(key, default)
    if not isinstance(value, str) or not value:
        raise RecognizerSpecError(f"recognizer spec needs a non-empty string {key!r}")
    return value


def _score(spec: Mapping[str, Any], key: str, default: float | None) -> float | None:
    value = spec.get(key, default)
    if value is None:
        return None
    if not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise RecognizerSpecError(f"{key!r} must be a number in [0, 1]")
    return float(value)


def _words(spec: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = spec.get(key, ())
    if not isinstance(value, list | tuple) or not all(isinstance(w, str) and w for w in value):
        raise RecognizerSpecError(f"{key!r} must be a list of non-empty strings")
    return tuple(value)


def regex_recognizer(spec: Mapping[str, Any]) -> PatternRecognizer:
    entity = _str(spec, "entity_type")
    flags = 0 if spec.get("case_sensitive", True) else re.IGNORECASE
    try:
        pattern = compile_pattern(_str(spec, "pattern"), flags)
    except re.error as exc:
        raise RecognizerSpecError(f"bad pattern for {entity}: {exc}") from exc
    return PatternRecognizer(
        name=_str(spec, "name", entity.lower()),
        entity_type=entity,
        pattern=pattern,
        score=_score(spec, "score", 0.8) or 0.0,
        context=_words(spec, "context"),
        context_score=_score(spec, "context_score", None),
    )


def word_list_recognizer(spec: Mapping[str, Any]) -> PatternRecognizer:
    entity = _str(spec, "entity_type")
    words = _words(spec, "words")
    if not words:
        raise RecognizerSpecError(f"word list for {entity} is empty")
    alternatives = "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))
    # ASCII words need word boundaries that do not depend on \b (CJK-safe).
    pattern = r"(?<![A-Za-z0-9_])(?:" + alternatives + r")(?![A-Za-z0-9_])"
    flags = 0 if spec.get("case_sensitive", False) else re.IGNORECASE
    return PatternRecognizer(
        name=_str(spec, "name", entity.lower()),
        entity_type=entity,
        pattern=compile_pattern(pattern, flags),
        score=_score(spec, "score", 0.9) or 0.0,
    )


def recognizer_from_spec(spec: Mapping[str, Any]) -> PatternRecognizer:
    """Build one recognizer from a config dict (``type``: ``regex`` or ``words``)."""
    kind = spec.get("type", "regex")
    if kind == "regex":
        return regex_recognizer(spec)
    if kind in ("words", "word_list", "deny_list"):
        return word_list_recognizer(spec)
    raise RecognizerSpecError(f"unknown recognizer type {kind!r} (use 'regex' or 'words')")
