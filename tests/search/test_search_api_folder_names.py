"""Model folders given from Python are refused naming the Python argument, not the CLI flag, and before any work."""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.search import CrossEncoderReranker, search_evaluate


def test_a_missing_cross_encoder_folder_names_model_path(tmp_path):
    # said "--rerank /tmp/...: no such folder" to a caller that typed no flag
    with pytest.raises(ConfigError, match=r"^model_path .*nope: no such folder; give a cross-encoder folder"):
        CrossEncoderReranker(tmp_path / "nope")


def test_search_evaluate_names_rerank_and_checks_it_before_reading_data(tmp_path):
    with pytest.raises(ConfigError, match=r"^rerank .*nope: no such folder"):
        search_evaluate(tmp_path / "no-data-here", "test", "bm25", rerank=tmp_path / "nope")


def test_search_evaluate_names_model_and_checks_it_before_reading_data(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"^model .*file: is a file, not a bi-encoder folder"):
        search_evaluate(tmp_path / "no-data-here", "test", "dense", model=tmp_path / "file")
