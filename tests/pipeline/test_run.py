"""pipeline/run.py: settings that would do nothing are said out loud."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from twotower.config import load_config
from twotower.pipeline.run import encode_item_texts


def test_item_text_without_text_embeddings_warns_that_it_has_no_effect(caplog):
    cfg = load_config(overrides=["data.item_text=[\"overview\"]"])
    prep = SimpleNamespace(item_meta=pd.DataFrame({"overview": ["a film"]}), sources=SimpleNamespace(item_spec=None))
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        assert encode_item_texts(cfg, prep) is None  # nothing encoded, as before
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "data.item_text=overview has no effect" in text and "model.item.text_embeddings=true" in text


def test_no_warning_without_item_text(caplog):
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        assert encode_item_texts(load_config(), SimpleNamespace(item_meta=None, sources=None)) is None
    assert not caplog.records


def test_a_resume_whose_text_encoder_backend_differs_names_the_backend_not_the_item_table(tmp_path, monkeypatch):
    # trained with TWOTOWER_ENCODER_BACKEND=torch-bf16, resumed without it: the re-encoded titles differ past the
    # text-buffer check, whose error blamed "the item table --items or its data.item_* settings"
    import numpy as np
    import pytest

    import twotower.pipeline.run as run_mod
    from tests.synthetic import make_interactions, make_items
    from twotower.errors import ConfigError

    fast = ["train.epochs=1", "train.progress=false", "train.threads=1", "train.checkpoint=true", "eval.baselines=[]",
            "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8", "model.item.out_dim=8",
            "model.item.dual_head=true", "data.title_col=title", "model.item_item.enabled=false"]
    frames = {"path": make_interactions(n_users=20, n_items=15, per_user=8), "items": make_items(15)}

    def encoded(model_id: str):
        def fake(config, prep, cache_dir=None):
            rng = np.random.default_rng(len(model_id))  # another backend: other vectors
            return rng.normal(size=(prep.n_items, 4)).astype(np.float32), model_id
        return fake

    monkeypatch.setattr(run_mod, "encode_item_texts", encoded("st@w+torch-bf16"))
    run_mod.train_run(load_config(overrides=fast), tmp_path / "run", frames=frames)
    monkeypatch.setattr(run_mod, "encode_item_texts", encoded("st@w"))
    with pytest.raises(ConfigError, match=r"encoded by st@w\+torch-bf16, this command's encoder is st@w; resume with "
                                          r"--encoder-backend torch-bf16"):
        run_mod.train_run(load_config(overrides=[*fast, "train.epochs=2"]), tmp_path / "run", resume=True,
                          frames=frames)
    monkeypatch.setattr(run_mod, "encode_item_texts", encoded("st@w+torch-bf16"))  # the run's backend resumes
    run_mod.train_run(load_config(overrides=[*fast, "train.epochs=2"]), tmp_path / "run", resume=True, frames=frames)


def test_a_runs_config_json_records_the_text_encoder_backend_and_replays_it(tmp_path, monkeypatch):
    # trained with --encoder-backend torch-bf16, a run's config.json did not say so: `train --config RUN/config.json`
    # encoded the titles with plain torch, another model, without a word (run.json alone named the backend)
    import json

    import numpy as np

    import twotower.pipeline.run as run_mod
    from tests.synthetic import make_interactions, make_items

    fast = ["train.epochs=1", "train.progress=false", "train.threads=1", "eval.baselines=[]", "model.item_item.enabled=false",
            "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8", "model.item.out_dim=8",
            "model.item.text_embeddings=true", "data.title_col=title"]
    frames = {"path": make_interactions(n_users=20, n_items=15, per_user=8), "items": make_items(15)}
    asked = []

    def fake(config, prep, cache_dir=None):  # the backend the config names, as the encoder reports it once resolved
        asked.append(config.train.encoder_backend)
        backend = config.train.encoder_backend or "torch"
        return np.ones((prep.n_items, 4), np.float32), "st@w" + ("" if backend == "torch" else f"+{backend}")

    monkeypatch.setattr(run_mod, "encode_item_texts", fake)
    monkeypatch.delenv("TWOTOWER_ENCODER_BACKEND", raising=False)
    run_mod.train_run(load_config(overrides=[*fast, "train.encoder_backend=torch-bf16"]), tmp_path / "t1", frames=frames)
    saved = json.loads((tmp_path / "t1" / "config.json").read_text())["train"]
    assert saved["encoder_backend"] == "torch-bf16"
    run_mod.train_run(load_config(tmp_path / "t1" / "config.json"), tmp_path / "t2", frames=frames)
    assert asked == ["torch-bf16", "torch-bf16"]
    assert json.loads((tmp_path / "t2" / "run.json").read_text())["item_text_encoder"] == "st@w+torch-bf16"
    # unset, the backend used is what the run records (a run's config.json from before the key: unset, as today)
    run_mod.train_run(load_config(overrides=fast), tmp_path / "t3", frames=frames)
    assert json.loads((tmp_path / "t3" / "config.json").read_text())["train"]["encoder_backend"] == "torch"
