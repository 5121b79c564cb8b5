"""A PQ under a refine (`PQ4x4,RFlat`) trained on too few vectors is said in one warning line, as a bare PQ is:
the once-only helper did not reach the refine's base index, so FAISS printed "clustering 300 points to 16
centroids: please provide at least 624 training points" once per sub-quantiser (4 lines), and no line of ours."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from twotower.index.faiss_index import FaissIndex, min_training_points


@pytest.mark.parametrize("spec", ["PQ4x4,RFlat", "IVF4,PQ4x4,Refine(PQ4x4)"])
def test_a_small_sample_under_a_refine_is_warned_about_once(spec, capfd, caplog):
    vectors = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
    with caplog.at_level(logging.WARNING, logger="twotower.index.faiss_index"):
        index = FaissIndex(spec).build(vectors, np.arange(300))
    assert index.search(vectors[:2], 5).ids.shape == (2, 5)
    assert "please provide at least" not in capfd.readouterr().err
    said = [r.getMessage() for r in caplog.records if "training vectors" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"{spec} wants 624 training vectors (39 per centroid) but only 300 "
                                                 "exist"), said


def test_the_training_need_counts_the_pq_under_a_refine():
    import faiss

    for spec in ("PQ4x4", "PQ4x4,RFlat", "PCA16,PQ4x4"):  # 16 centroids per sub-quantiser, 39 points each
        assert min_training_points(faiss.index_factory(16, spec, faiss.METRIC_INNER_PRODUCT)) == 624, spec
