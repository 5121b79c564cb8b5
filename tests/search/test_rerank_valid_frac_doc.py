"""RerankTrainConfig.valid_frac's meaning (docs/config.md) names the lists `rerank train --valid-frac` reranks: the
--mining-retriever's, dense with `--mining-retriever dense`; it said BM25's order whatever the flag."""
from __future__ import annotations

from twotower import config as C
from twotower.config_doc import field_meanings


def test_valid_frac_names_the_mining_retrievers_lists_not_bm25_alone():
    meaning = field_meanings(C.RerankTrainConfig)["valid_frac"]
    assert "--mining-retriever" in meaning and "dense" in meaning
    assert "against BM25's order" not in meaning

