"""A run whose weights are edited in memory ranks with the edited weights.

In a notebook: load a run, look at its lists, change a layer (``with torch.no_grad(): p.mul_(...)``), ask again.
``tt.recommend`` and ``tt.similar`` answered with the item vectors, the known users' vectors and the fingerprint
cached from the weights as loaded, while a new user's vector came from the edited weights: lists of neither model.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import twotower as tt
from tests.synthetic import LOO_FAST, write_loo_split
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    split = write_loo_split(tmp_path_factory.mktemp("loo"))
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["-q", "train", "--train", str(split / "train.csv"), "--valid", str(split / "valid.csv"),
                 "--out", str(out), "--epochs", "1", "--no-eval", "model.user.history=mean", *LOO_FAST]) == 0
    return out


def _edit(run, how):
    """Scramble both towers' last layers (the same numbers for every run it is applied to)."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in run.model.named_parameters():
            if name.endswith("weight") and ("user_tower" in name or "item_tower" in name) and p.dim() == 2:
                new = torch.randn(p.shape, generator=g)
                if how == "no_grad":
                    p.copy_(new)
                else:  # through .data: no version counter sees it
                    p.data.copy_(new)


def _lists(run):
    users = list(run.user_vocab.ids[:5])
    return (tt.recommend(run, users, k=5, exact=True), tt.recommend(run, history=[run.item_vocab.ids[0]], k=5, exact=True),
            tt.similar(run, list(run.item_vocab.ids[:3]), k=5, exact=True))


def test_lists_follow_an_in_place_weight_edit(run_dir):
    run = tt.TrainedRun.load(run_dir)
    before, fp = _lists(run), run.fingerprint()
    _edit(run, "no_grad")
    truth = tt.TrainedRun.load(run_dir)  # the same edit, made before anything was cached
    _edit(truth, "no_grad")
    expected = _lists(truth)
    assert expected != before  # the edit changes the lists
    assert _lists(run) == expected
    assert run.fingerprint() == truth.fingerprint() != fp
    np.testing.assert_array_equal(run.item_embeddings(), truth.item_embeddings())


def test_clear_caches_after_an_edit_through_data(run_dir):
    run = tt.TrainedRun.load(run_dir)
    _lists(run)
    _edit(run, "data")
    run.clear_caches()
    truth = tt.TrainedRun.load(run_dir)
    _edit(truth, "data")
    assert _lists(run) == _lists(truth)


def test_unchanged_weights_keep_their_cached_vectors(run_dir):
    run = tt.TrainedRun.load(run_dir)
    first = run.item_embeddings()
    _lists(run)
    assert run.item_embeddings() is first  # nothing recomputed without an edit
