"""finetune_bi_encoder(validation=...) with a ValidationSet built by hand: checked when built and before training."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError, DataError
from twotower.search import finetune_bi_encoder
from twotower.search.validation import ValidationSet

DOCS = ["aspirin heart", "vitamin d bones", "sleep obesity", "coffee liver"]


@pytest.mark.parametrize("queries, relevant, match", [
    (["a", "b"], [np.array([1])], r"one array of relevant corpus rows per query"),  # was "1 users but ranked has 2"
    ([], [], r"at least one query"),  # wrote NDCG@10 NaN and best -inf into the marker
    (["a"], [np.array([], dtype=np.int64)], r"non-empty 1-d array"),  # NaN likewise
    (["a"], [np.array([-1])], r"integers >= 0"),
    (["a"], [np.array([0.5])], r"integers >= 0"),
    ("ab", [np.array([0]), np.array([1])], r"queries must be a list of query texts"),
])
def test_a_validation_set_that_cannot_be_scored_is_refused_when_built(queries, relevant, match):
    with pytest.raises(ConfigError, match=match):
        ValidationSet(queries, relevant)


def test_a_validation_row_past_the_corpus_is_refused_before_training(tmp_path):
    # never retrieved: validation scored 0.0 at every epoch, without a word
    with pytest.raises(DataError, match=r"validation.relevant rows must lie in \[0, 4\)"):
        finetune_bi_encoder(["q1", "q2"], [0, 1], DOCS, tmp_path / "bi",
                            validation=ValidationSet(["q3"], [np.array([9999])]))


def test_one_string_for_the_queries_is_refused(tmp_path):
    # "abc" with rows [0, 1, 2] trained three one-letter queries
    with pytest.raises(ConfigError, match=r"^queries must be a list of query texts, not one string"):
        finetune_bi_encoder("abc", [0, 1, 2], DOCS, tmp_path / "bi")
