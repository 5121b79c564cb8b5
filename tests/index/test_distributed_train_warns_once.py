"""A distributed build's training sample too small for its PQ codebooks is said in one warning line, as
FaissIndex.build says it: FAISS printed "clustering N points to 256 centroids: please provide at least ..." once
per sub-quantiser (bench/scale_out.py --train-size 2000: 16 lines over its table)."""
from __future__ import annotations

import logging

import numpy as np

from twotower.index.distributed_build import train_empty_index


def test_a_small_training_sample_is_warned_about_once(capfd, caplog):
    rng = np.random.default_rng(0)
    sample = rng.standard_normal((1000, 16)).astype(np.float32)
    with caplog.at_level(logging.WARNING, logger="twotower.index.distributed_build"):
        index, resolved = train_empty_index("IVF8,PQ8", sample)
    assert index.is_trained and resolved == "IVF8,PQ8"
    assert "please provide at least" not in capfd.readouterr().err
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("IVF8,PQ8 wants 9984 training vectors (39 per centroid) but the "
                                                 "sample has 1000"), said
