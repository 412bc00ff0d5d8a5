"""The fuzz suite's Hypothesis profiles (registered, never loaded globally)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "fuzz-ci", max_examples=100, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)
settings.register_profile(
    "fuzz-long", parent=settings.get_profile("fuzz-ci"), max_examples=2000,
    derandomize=False,
)


def fuzz_settings(scale: float = 1.0) -> settings:
    """The profile named by ``TOKENPLANE_FUZZ_PROFILE`` (``fuzz-ci`` by default), its
    ``max_examples`` scaled for a test that is cheaper or dearer than most."""
    base = settings.get_profile(os.environ.get("TOKENPLANE_FUZZ_PROFILE", "fuzz-ci"))
    return settings(base, max_examples=max(1, int(base.max_examples * scale)))
