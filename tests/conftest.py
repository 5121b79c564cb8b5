"""Shared pytest setup: deterministic, single-threaded torch on shared CPU cores."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

torch.set_num_threads(1)

# ---------------------------------------------------------------- hypothesis profiles (issue 7)
# `ci` (default): ~50 generated cases per boundary, part of the fast suite.
# `slow`: >= 1,000 cases per boundary; select with HYPOTHESIS_PROFILE=slow and run the
# `@pytest.mark.slow` fuzz tests (pytest -m slow -k fuzz). No deadline: the cores are shared.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", max_examples=50, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
settings.register_profile(
    "slow", max_examples=1000, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
