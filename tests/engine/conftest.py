"""Fixtures for the simulated engine's service and server tests."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from tokenplane.engine.defaults import default_tokenizer, simple_prompt_ids
from tokenplane.engine.profiles import EngineProfile, get_profile
from tokenplane.engine.serving.service import EngineService
from tokenplane.tokens.base import Tokenizer

MODEL = "sim-llama"


@pytest.fixture(scope="session")
def tokenizer() -> Tokenizer:
    return default_tokenizer()


def paced_profile(step_s: float = 0.002) -> EngineProfile:
    """The instant profile with a small real step time (so streams can be interrupted)."""
    return dataclasses.replace(get_profile("instant"), name="paced", t_floor_s=step_s)


@pytest.fixture
async def service(tokenizer: Tokenizer) -> AsyncIterator[EngineService]:
    svc = EngineService(
        get_profile("instant"), tokenizer, simple_prompt_ids(tokenizer), MODEL,
        record_bodies=True, record_limit=5,
    )
    await svc.start()
    yield svc
    await svc.close()


@pytest.fixture
async def paced_service(tokenizer: Tokenizer) -> AsyncIterator[EngineService]:
    svc = EngineService(paced_profile(), tokenizer, simple_prompt_ids(tokenizer), MODEL)
    await svc.start()
    yield svc
    await svc.close()
