"""Shared, session-scoped tokenizers for the token tests (loading each takes ~0.2 s)."""

from __future__ import annotations

import pytest

from tokenplane.tokens.counter import TokenCounting
from tokenplane.tokens.registry import TokenizerRegistry


@pytest.fixture(scope="session")
def registry() -> TokenizerRegistry:
    return TokenizerRegistry()


@pytest.fixture(scope="session")
def counting(registry: TokenizerRegistry) -> TokenCounting:
    return TokenCounting(registry)
