"""FAISS's k-means training reports nothing through logging: `twotower index build --index auto` at 1M items
logged "training IVF16384_HNSW32,Flat on 1000000 vectors" and then nothing for many minutes (off a terminal,
where a periodic line is promised). A heartbeat now logs while the training call runs."""
from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from twotower.index.faiss_index import FaissIndex
from twotower.utils.progress import heartbeat

log = logging.getLogger("twotower.test")


def test_heartbeat_logs_while_a_block_runs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="twotower"):
        with heartbeat(log, "a long call", 0.01):
            time.sleep(0.2)
        lines = [r.getMessage() for r in caplog.records]
        assert any(m.startswith("a long call: still running") for m in lines), lines
        caplog.clear()
        time.sleep(0.05)
        assert not caplog.records  # the thread stops with the block
        with heartbeat(log, "quiet", None):
            time.sleep(0.05)
        assert not caplog.records


def test_ivf_training_is_not_silent(caplog: pytest.LogCaptureFixture) -> None:
    x = np.random.default_rng(0).standard_normal((20_000, 16)).astype(np.float32)
    with caplog.at_level(logging.INFO, logger="twotower"):
        FaissIndex("IVF256,Flat", log_every_s=1e-4).build(x, np.arange(x.shape[0]))
    lines = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("training IVF256,Flat: still running") for m in lines), lines
