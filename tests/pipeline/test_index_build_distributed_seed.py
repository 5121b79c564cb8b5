"""`twotower index build --seed` under torchrun seeds FAISS as the one-process build does.

The ranks' build (pipeline.index_build_distributed) is called here in one process, without a process group:
rank 0's path, whose k-means is what the seed has to reach. tests/pipeline/test_torchrun.py runs it across 2 ranks.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.index import IndexPolicy
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.index_build_distributed import build_distributed


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> TrainedRun:
    return TrainedRun.load(build_tiny_run(tmp_path_factory.mktemp("dist_seed")))


def _build(run: TrainedRun, out: Path, seed: int) -> str:
    """sha256 of the saved index.faiss built with ``seed``."""
    policy = IndexPolicy(seed=seed, tune_queries=10, k=5)
    assert build_distributed(run, "IVF4,Flat", out, policy, None, {"nprobe": 1}, lambda line: None) is not None
    return hashlib.sha256((out / "index.faiss").read_bytes()).hexdigest()


def test_the_distributed_build_honours_the_seed(run, tmp_path):
    first, again, other = (_build(run, tmp_path / name, seed) for name, seed in (("a", 3), ("b", 3), ("c", 0)))
    assert first == again  # the same seed, the same bytes
    # before: the seed chose the tuning queries and training sample only, and the whole catalogue is the sample
    # here, so every seed built seed 0's index
    assert first != other
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["config"]["seed"] == 3 and meta["build_params"]["seed"] == 3  # meta.json said 0 whatever the seed
