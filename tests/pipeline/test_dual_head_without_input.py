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


@pytest.mark.parametrize("setting", ["model.item.dual_head", "model.item.text_embeddings"])
def test_item_texts_without_an_item_table_name_the_setting_before_the_data_is_read(tmp_path, monkeypatch,
                                                                                    setting) -> None:
    # `model.item.dual_head=true` alone was refused as "model.item.text_embeddings needs an item table", a
    # setting the user never set, once the interactions had been read
    import twotower.pipeline.sources as sources_mod

    def must_not_read(*args, **kwargs):
        raise AssertionError("the interactions were read before the refusal")

    monkeypatch.setattr(sources_mod, "read_interactions", must_not_read)
    cfg = load_config(overrides=["train.epochs=1", "train.threads=1", f"{setting}=true"])
    with pytest.raises(ConfigError) as refused:
        run_mod.train_run(cfg, tmp_path / "run", frames={"path": make_interactions(n_users=20, n_items=15)})
    assert str(refused.value).startswith(f"{setting}=true needs item texts: pass --items FILE (data.items)")
    assert f"or set {setting}=false" in str(refused.value)
    assert not (tmp_path / "run").exists()
