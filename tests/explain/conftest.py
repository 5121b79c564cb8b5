"""Two tiny trained runs shared by the explanation tests (trained once per session, a few seconds each)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from explain_tiny_run import train_tiny_run  # noqa: E402


@pytest.fixture(scope="session")
def mean_run(tmp_path_factory):
    """Mean-pooled history, no user features, no user IDs."""
    from twotower.pipeline.artifacts import TrainedRun

    return TrainedRun.load(train_tiny_run(tmp_path_factory.mktemp("explain") / "mean", history="mean", epochs=3))


@pytest.fixture(scope="session")
def feature_run(tmp_path_factory):
    """Recency-pooled history plus a numeric user feature (``age``); user ``u_new`` has no history."""
    from twotower.pipeline.artifacts import TrainedRun

    d = tmp_path_factory.mktemp("explain") / "feat"
    return TrainedRun.load(train_tiny_run(d, history="recency", user_features=True, epochs=3))
