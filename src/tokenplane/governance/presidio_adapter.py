"""Optional adapter that runs Microsoft Presidio's analyzer as one more recognizer.

Used only when ``presidio_analyzer`` is importable; it is not a dependency.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from tokenplane.governance.spans import Span


def presidio_available() -> bool:
    return importlib.util.find_spec("presidio_analyzer") is not None


class PresidioRecognizer:
    """Wraps ``presidio_analyzer.AnalyzerEngine``; entity names pass through unchanged."""

    def __init__(
        self,
        entities: tuple[str, ...] = (),
        language: str = "en",
        engine: Any | None = None,
    ) -> None:
        if engine is None:
            module = importlib.import_module("presidio_analyzer")
            engine = module.AnalyzerEngine()
        self._engine = engine
        self._language = language
        self._entities = entities

    @property
    def name(self) -> str:
        return "presidio"

    @property
    def entities(self) -> tuple[str, ...]:
        return self._entities

    def find(self, text: str) -> list[Span]:
        results = self._engine.analyze(
            text=text, language=self._language, entities=list(self._entities) or None
        )
        return [
            Span(int(r.start), int(r.end), str(r.entity_type), float(r.score), "presidio")
            for r in results
        ]


def maybe_presidio(
    entities: tuple[str, ...] = (), language: str = "en"
) -> PresidioRecognizer | None:
    """A Presidio recognizer when the package is installed, else None."""
    if not presidio_available():
        return None
    return PresidioRecognizer(entities, language)
