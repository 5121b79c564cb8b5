"""The types the public search functions take are reachable where those functions are."""

from __future__ import annotations

import subprocess
import sys

import numpy as np


def test_validation_types_are_exported_with_the_functions_that_take_them():
    # finetune_bi_encoder(validation=ValidationSet) and train_cross_encoder(validation=RerankValidation) are public,
    # but their argument types were only in twotower.search.validation / .rerank
    import twotower.search as ts

    assert {"ValidationSet", "RerankValidation"} <= set(ts.__all__)
    v = ts.ValidationSet(["q"], [np.array([0])])
    assert v.pairs == 1
    assert ts.RerankValidation.__module__ == "twotower.search.rerank"


def test_they_are_reached_through_tt_search_without_torch():
    code = (
        "import sys, twotower as tt; print(tt.search.ValidationSet.__name__, tt.search.RerankValidation.__name__, "
        "'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["ValidationSet", "RerankValidation", "False"]


def test_prepare_beir_is_exported_with_the_other_search_functions():
    # finetune_bi_encoder, SearchIndex, ... were in twotower.search, prepare_beir (`search prepare`) only in
    # twotower.search.prepare, and its PrepareConfig only in twotower.config
    code = (
        "import sys, twotower as tt; from twotower.search import PrepareConfig, prepare_beir; "
        "print(prepare_beir.__module__, PrepareConfig.__name__, tt.search.prepare_beir is prepare_beir, "
        "{'prepare_beir', 'PrepareConfig'} <= set(tt.search.__all__), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["twotower.search.prepare", "PrepareConfig", "True", "True", "False"]
