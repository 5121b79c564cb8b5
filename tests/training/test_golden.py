"""The default MovieLens-100K run still trains exactly as before the training rewrite (issue 11).

``golden_ml100k.json`` was recorded with the old trainer (commit 35be1a0, before
any change to losses/ or training/); the new loop draws its random numbers in
the same order (same permutation, same generator calls, the towers called in
the same order), so on one thread the figures agree to float round-off.

Round-off depends on the CPU's kernels: on an AVX-512 machine (Zen 4) both the old trainer and the new one give
valid NDCG@10 0.16208336 at epoch 2 against the recorded 0.16208753 (AVX2, Zen 3): one near-tied pair of items
swapped in one user's list. Losses are held to 1e-6 relative; ranking metrics to 1e-4, which admits such a swap
(one place in one of 943 lists moves a mean by ~1e-5 relative) and nothing a real change of behaviour would make.
Slow: ~35 s of training, and MovieLens-100K must be fetchable.
"""
from __future__ import annotations

import json

import pytest

from tests.training.golden_ml100k import GOLDEN, run_golden

pytestmark = pytest.mark.slow
RANKING_REL = 1e-4  # a near-tie swapped by another CPU's round-off (module docstring)


def test_default_ml100k_run_matches_golden() -> None:
    try:
        from twotower.data.movielens import fetch_movielens_100k

        fetch_movielens_100k()
    except Exception as e:  # no network and no cached copy
        pytest.skip(f"MovieLens-100K unavailable: {e}")
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    got = run_golden()
    assert [r["epoch"] for r in got["epochs"]] == [r["epoch"] for r in want["epochs"]]
    for g, w in zip(got["epochs"], want["epochs"]):
        for k, v in w.items():
            rel = 1e-6 if k == "loss" else RANKING_REL
            assert g[k] == pytest.approx(v, rel=rel, abs=1e-9), (g["epoch"], k)
    assert got["best_epoch"] == want["best_epoch"]
    for k, v in want["test"].items():
        assert got["test"][k] == pytest.approx(v, rel=RANKING_REL, abs=1e-9), k
