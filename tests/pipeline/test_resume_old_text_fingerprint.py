"""A run saved when text-model fingerprints hashed only each file's head and tail resumes with today's encoder."""
from __future__ import annotations

import numpy as np
import pytest

import twotower.pipeline.run as run_mod
from tests.synthetic import make_interactions, make_items
from tests.text.test_weights_fingerprint import _head_tail, _model_dir
from twotower.config import load_config
from twotower.errors import ConfigError
from twotower.text.encoder import weights_fingerprint

FAST = ["train.epochs=1", "train.progress=false", "train.threads=1", "train.checkpoint=true", "eval.baselines=[]",
        "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8", "model.item.out_dim=8",
        "model.item.dual_head=true", "data.title_col=title", "model.item_item.enabled=false"]


def _encoded(model_id: str):
    def fake(config, prep, cache_dir=None):
        return np.random.default_rng(0).normal(size=(prep.n_items, 4)).astype(np.float32), model_id
    return fake


def test_a_run_recording_the_old_fingerprint_resumes_and_other_weights_are_refused(tmp_path, monkeypatch):
    model = _model_dir(tmp_path / "model")
    now, old = weights_fingerprint(model), _head_tail(model)
    frames = {"path": make_interactions(n_users=20, n_items=15, per_user=8), "items": make_items(15)}
    monkeypatch.setattr(run_mod, "encode_item_texts", _encoded(f"st@{old}"))  # saved before the change
    run_mod.train_run(load_config(overrides=FAST), tmp_path / "run", frames=frames)
    monkeypatch.setattr(run_mod, "encode_item_texts", _encoded(f"st@{'0' * 16}"))
    with pytest.raises(ConfigError, match=r"encoded by st@"):
        run_mod.train_run(load_config(overrides=[*FAST, "train.epochs=2"]), tmp_path / "run", resume=True,
                          frames=frames)
    monkeypatch.setattr(run_mod, "encode_item_texts", _encoded(f"st@{now}"))  # the same weights, hashed whole
    run_mod.train_run(load_config(overrides=[*FAST, "train.epochs=2"]), tmp_path / "run", resume=True, frames=frames)
