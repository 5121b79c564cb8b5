"""What `rerank train --base` says about a folder it cannot start from.

Regression for a user walkthrough: the flag starts from a plain sentence-transformers folder (its --help:
"starting sentence-transformers directory"), yet `rerank train --base EMPTY` answered "give the output of
'twotower rerank train'" and a missing --base "give a cross-encoder folder", as if only a trained reranker were
accepted.
"""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.search.artefacts import check_cross_encoder_dir


def test_rerank_train_base_that_is_no_model_names_the_folders_it_accepts(tmp_path):
    with pytest.raises(ConfigError, match=r"^--base .*: not a cross-encoder or sentence-transformers folder "
                                          r"\(no twotower_cross_encoder\.json; no config\.json\); give the output of "
                                          r"'twotower rerank train' or a sentence-transformers / transformers model"):
        check_cross_encoder_dir(tmp_path, "--base", base=True)


def test_a_missing_base_names_the_folders_it_accepts(tmp_path):
    with pytest.raises(ConfigError, match=r"^--base .*nope: no such folder; give a cross-encoder or "
                                          r"sentence-transformers folder$"):
        check_cross_encoder_dir(tmp_path / "nope", "--base", base=True)


def test_rerank_is_still_asked_for_a_trained_cross_encoder(tmp_path):
    with pytest.raises(ConfigError, match=r"^--rerank .*: not a cross-encoder folder .*; give the output of "
                                          r"'twotower rerank train'$"):
        check_cross_encoder_dir(tmp_path, "--rerank")
