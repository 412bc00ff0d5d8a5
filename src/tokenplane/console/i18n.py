"""The console's languages: message catalogs (``messages/<lang>.json``, package data)
and the choice of language (the switch's cookie, then the browser's Accept-Language,
then ``console.language``)."""

from __future__ import annotations

from importlib import resources

import orjson

LANGUAGES: tuple[str, ...] = ("en", "zh-CN")


def load_catalogs() -> dict[str, dict[str, str]]:
    base = resources.files("tokenplane.console") / "messages"
    out: dict[str, dict[str, str]] = {}
    for lang in LANGUAGES:
        data = orjson.loads((base / f"{lang}.json").read_bytes())
        out[lang] = {str(k): str(v) for k, v in data.items()}
    return out


def _match(tag: str) -> str | None:
    tag = tag.strip().lower()
    if tag.startswith("zh"):
        return "zh-CN"
    if tag.startswith("en"):
        return "en"
    return None


def pick_language(cookie: str | None, accept: str | None, default: str) -> str:
    """The switch wins, then the browser's first language we speak (by q), then the
    default."""
    if cookie in LANGUAGES:
        return str(cookie)
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate((accept or "").split(",")):
        tag, _, params = part.partition(";")
        q = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                q = float(params[2:])
            except ValueError:
                q = 0.0
        lang = _match(tag)
        if lang is not None and q > 0:
            ranked.append((-q, i, lang))
    return sorted(ranked)[0][2] if ranked else default


class Translator:
    """``t(key, **values)`` in one language; a missing key shows the key itself (the
    catalog test makes sure none is missing)."""

    def __init__(self, catalogs: dict[str, dict[str, str]], lang: str) -> None:
        self.lang = lang
        self.messages = catalogs[lang]

    def __call__(self, key: str, **values: object) -> str:
        text = self.messages.get(key, key)
        return text.format(**values) if values else text
