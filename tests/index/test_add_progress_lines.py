"""Off a terminal, adding vectors to an index logs its line every ``log_every_s`` seconds, also inside a long chunk.

Walk: `autotune` of a 300,000 x 64 catalogue on one thread, log redirected: "building hnsw (3 of 4)" at 07:02:45,
then nothing until "adding to HNSW32: 262144 / 300000 vectors" at 07:03:35. The vectors go to FAISS in chunks of
131,072 (about 25 s each for an HNSW graph on one thread) and a line could only follow a chunk, so the promised
30 s became 50 s (at 1M items, minutes).
"""
from __future__ import annotations

import io
import logging
import sys
import time

import numpy as np
import pytest

from twotower.index import FaissIndex
from twotower.utils import progress


def _wait_for_line(caplog: pytest.LogCaptureFixture, what: str, limit_s: float = 20.0) -> bool:
    """Whether a line naming ``what`` is logged within ``limit_s`` (a bound, not a timing measured)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if any(what in r.getMessage() for r in caplog.records):
            return True
        time.sleep(0.01)
    return False


def test_a_line_comes_while_one_long_step_runs(monkeypatch, caplog) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # off a terminal
    logger = logging.getLogger("twotower.test.between")
    with caplog.at_level(logging.INFO, logger=logger.name):
        rates = progress.RateLog(logger, "adding", 4, "vectors", 0.01, rate_unit="vectors")
        with rates.between_updates():
            assert _wait_for_line(caplog, "adding: 0 / 4 vectors, ")  # no update() yet: the step still runs
    first = next(r.getMessage() for r in caplog.records if "adding: 0 / 4" in r.getMessage())
    assert first.endswith("s so far") and "ETA" not in first, first  # no rate yet: no ETA of 10^14 s
    assert not [t for t in __import__("threading").enumerate() if t.name == "twotower-ratelog"]


def test_adding_to_an_index_logs_inside_a_chunk(monkeypatch, caplog) -> None:
    import twotower.index.faiss_index as fi

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    index = FaissIndex("hnsw", log_every_s=0.01)
    seen_during: list[bool] = []
    with caplog.at_level(logging.INFO, logger=fi.log.name):
        index.build(x[:32], np.arange(32, dtype=np.int64))
        real_add = index._index.add_with_ids

        def slow_add(vectors, ids):  # noqa: ANN001 - a chunk that outlasts the interval
            seen_during.append(_wait_for_line(caplog, "adding to HNSW32: 0 / 32 vectors"))
            return real_add(vectors, ids)

        monkeypatch.setattr(index._index, "add_with_ids", slow_add, raising=False)
        index.add(x[32:], np.arange(32, 64, dtype=np.int64))
    assert seen_during == [True]
    assert len(index) == 64
