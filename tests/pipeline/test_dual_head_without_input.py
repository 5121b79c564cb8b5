"""A dual-head item tower whose collaborative head reads nothing is refused before the item texts are encoded."""
from __future__ import annotations

import pytest

import twotower.pipeline.run as run_mod
from tests.synthetic import make_interactions, make_items
from twotower.config import load_config
from twotower.errors import ConfigError


def test_no_collaborative_input_is_refused_before_encoding(tmp_path, monkeypatch) -> None:
    def must_not_encode(config, prep, cache_dir=None):  # minutes over a large catalogue, then the refusal
        raise AssertionError("the item texts were encoded before the refusal")

    monkeypatch.setattr(run_mod, "encode_item_texts", must_not_encode)
    cfg = load_config(overrides=["train.epochs=1", "train.progress=false", "train.threads=1", "eval.baselines=[]",
                                 "model.item.dual_head=true", "model.item.use_id=false", "data.title_col=title"])
    frames = {"path": make_interactions(n_users=20, n_items=15, per_user=8), "items": make_items(15)}
    with pytest.raises(ConfigError, match=r"model.item.dual_head: the collaborative head has no input"):
        run_mod.train_run(cfg, tmp_path / "run", frames=frames)
    assert not (tmp_path / "run").exists()
