"""An OPQ rotation trained on too few vectors is said in one warning line of ours, with the need of the 8-bit PQ
it trains for itself: ``OPQ4,PQ4x4`` on 300 vectors printed FAISS's "clustering 300 points to 256 centroids:
please provide at least 9984 training points" 200 times (4 sub-quantisers x 50 OPQ iterations), and our line said
624 (the 4-bit PQ's need)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from twotower.index.faiss_index import FaissIndex, min_training_points


@pytest.mark.parametrize("spec", ["OPQ4,PQ4x4", "OPQ4_16,IVF4,PQ4x4"])
def test_a_small_sample_under_opq_is_warned_about_once_with_its_need(spec, capfd, caplog):
    vectors = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    with caplog.at_level(logging.WARNING, logger="twotower.index.faiss_index"):
        index = FaissIndex(spec).build(vectors, np.arange(300))
    assert index.search(vectors[:2], 5).ids.shape == (2, 5)
    assert "please provide at least" not in capfd.readouterr().err
    said = [r.getMessage() for r in caplog.records if "training vectors" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"{spec} wants 9984 training vectors (39 per centroid) but only "
                                                 "300 exist"), said


def test_the_training_need_counts_the_pq_opq_trains():
    import faiss

    for spec in ("OPQ4,PQ4x4", "OPQ4,PQ4x4,RFlat", "OPQ4_16,IVF4,PQ4x4"):  # OPQ's own PQ: 256 centroids, 39 each
        assert min_training_points(faiss.index_factory(16, spec, faiss.METRIC_INNER_PRODUCT)) == 9984, spec
