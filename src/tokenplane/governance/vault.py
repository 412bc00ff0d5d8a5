"""Reversible placeholders for one request, and their restoration (also in streams)."""

from __future__ import annotations

import re

import orjson

PLACEHOLDER_RE = re.compile(r"<([A-Z][A-Z0-9_]*)_([0-9]+)>")


class Vault:
    """Maps values to placeholders like ``<CN_ID_CARD_1>`` for one request.

    The same value always gets the same placeholder; numbering is per entity type.
    Lives only as long as the request; never persisted.
    """

    def __init__(self) -> None:
        self._by_value: dict[tuple[str, str], str] = {}
        self._by_placeholder: dict[str, str] = {}
        self._counters: dict[str, int] = {}
        self.longest = 0

    def __len__(self) -> int:
        return len(self._by_placeholder)

    def tokenize(self, value: str, entity_type: str) -> str:
        key = (entity_type, value)
        existing = self._by_value.get(key)
        if existing is not None:
            return existing
        n = self._counters.get(entity_type, 0) + 1
        self._counters[entity_type] = n
        placeholder = f"<{entity_type}_{n}>"
        self._by_value[key] = placeholder
        self._by_placeholder[placeholder] = value
        self.longest = max(self.longest, len(placeholder))
        return placeholder

    def placeholders(self) -> list[str]:
        return list(self._by_placeholder)

    def lookup(self, placeholder: str) -> str | None:
        return self._by_placeholder.get(placeholder)

    def could_start(self, fragment: str) -> bool:
        """True when ``fragment`` is a proper prefix of a placeholder of this vault."""
        return any(p.startswith(fragment) and p != fragment for p in self._by_placeholder)

    def restore(self, text: str) -> str:
        """Replace every known placeholder in ``text`` by its value."""
        if not self._by_placeholder or "<" not in text:
            return text
        return PLACEHOLDER_RE.sub(self._swap, text)

    def restore_json(self, text: str) -> str:
        """Restore inside JSON text (tool-call ``arguments``): values are JSON-escaped,
        so a value with quotes or backslashes keeps the document valid."""
        if not self._by_placeholder or "<" not in text:
            return text
        return PLACEHOLDER_RE.sub(self._swap_json, text)

    def _swap(self, m: re.Match[str]) -> str:
        return self._by_placeholder.get(m.group(0), m.group(0))

    def _swap_json(self, m: re.Match[str]) -> str:
        value = self._by_placeholder.get(m.group(0))
        return m.group(0) if value is None else orjson.dumps(value).decode()[1:-1]


class StreamRestorer:
    """Restores placeholders in streamed text split at arbitrary points.

    ``feed`` returns what can be shown now; it holds back only a tail that could
    still become a placeholder of the vault (from the last ``<``), so the client
    never sees a placeholder or a fragment of one. ``flush`` returns the rest.
    """

    def __init__(self, vault: Vault) -> None:
        self._vault = vault
        self._held = ""

    @property
    def held(self) -> str:
        return self._held

    def feed(self, chunk: str) -> str:
        buffer = self._held + chunk if self._held else chunk
        if not len(self._vault):
            self._held = ""
            return buffer
        cut = buffer.rfind("<")
        if cut >= 0 and len(buffer) - cut < self._vault.longest:
            tail = buffer[cut:]
            if ">" not in tail and self._vault.could_start(tail):
                self._held = tail
                return self._vault.restore(buffer[:cut])
        self._held = ""
        return self._vault.restore(buffer)

    def flush(self) -> str:
        rest, self._held = self._held, ""
        return rest
