"""`recommend --users all` over many users logs its progress: users done, rate, ETA."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.recommend import recommend_users

FAST = ["train.batch_size=32", "model.user.hidden=[32]", "model.item.hidden=[32]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.user.history_len=8", "--no-progress", "eval.baselines=[]"]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> TrainedRun:
    data = write_dataset(tmp_path_factory.mktemp("data"))
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["-q", "train", "--train", str(data["train"]), "--valid", str(data["valid"]), "--out", str(out),
                 "--epochs", "1", *FAST]) == 0
    return TrainedRun.load(out)


def test_progress_lines_count_users_and_give_an_eta(run: TrainedRun, caplog: pytest.LogCaptureFixture) -> None:
    rows = np.arange(len(run.user_vocab))
    with caplog.at_level(logging.INFO, logger="twotower.pipeline.recommend"):
        quiet = recommend_users(run, rows, 3, None, batch=8)
        assert not caplog.records  # no interval: no lines (single users, evaluation's own chunks)
        res = recommend_users(run, rows, 3, None, batch=8, log_every_s=1e-9)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == -(-rows.size // 8)  # one per chunk at this interval
    assert lines[0].startswith(f"recommending: 8 / {rows.size} users, ") and "users/s, ETA" in lines[0]
    assert lines[-1].startswith(f"recommending: {rows.size} / {rows.size} users") and lines[-1].endswith("ETA 0s")
    np.testing.assert_array_equal(res.ids, quiet.ids)
