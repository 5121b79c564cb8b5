"""finetune_bi_encoder with config.valid_frac and validation= both: refused, since one of them would be ignored."""

from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.search import FinetuneConfig, ValidationSet, finetune_bi_encoder
from twotower.search.validation import hold_out

DOCS = ["aspirin heart", "vitamin d bones", "sleep obesity", "coffee liver"]
QUERIES = ["aspirin", "vitamin", "sleep", "coffee"]


def test_valid_frac_with_a_validation_set_of_ones_own_is_refused_naming_both(tmp_path):
    # valid_frac=0.25 was dropped without a word: every pair was trained on, only the given set was scored
    own = ValidationSet(["heart attack"], [np.array([0])])
    # named as FinetuneConfig names its own refusals (FinetuneConfig.lr: must be > 0), not "config.valid_frac=0.25"
    with pytest.raises(ConfigError, match=r"^FinetuneConfig\.valid_frac: 0\.25 and validation= are both given, .*"
                                          r"pass validation= with FinetuneConfig\.valid_frac=0 "):
        finetune_bi_encoder(QUERIES, [0, 1, 2, 3], DOCS, tmp_path / "bi", config=FinetuneConfig(valid_frac=0.25),
                            validation=own)
    assert not (tmp_path / "bi").exists()


def test_the_hold_out_of_that_very_share_is_the_same_choice():
    # what `search train --valid-frac F` passes: the queries it held out with F, and F recorded in the config
    _, valid = hold_out(QUERIES, [0, 1, 2, 3], 0.25, seed=0)
    assert valid.valid_frac == 0.25
    assert ValidationSet(["q"], [np.array([0])]).valid_frac is None
