"""`recommend --users all` over many users logs its progress: users done, rate, ETA."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.recommend import exclusions_from_files, recommend_users

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


def _csv_by_hand(run: TrainedRun, rows: np.ndarray, res) -> str:  # noqa: ANN001 - Results
    """The CSV `recommend --out` wrote before it wrote in blocks: one frame built row by row, one to_csv."""
    import pandas as pd

    out: dict[str, list] = {"user_id": [], "item_id": [], "rank": [], "score": []}
    for q, u in enumerate(rows):
        ids, sc = res.row(q)
        for r, (i, s) in enumerate(zip(ids, sc), start=1):
            out["user_id"].append(run.user_vocab.id_at(int(u)))
            out["item_id"].append(run.item_vocab.id_at(int(i)))
            out["rank"].append(r)
            out["score"].append(float(s))
    return pd.DataFrame(out).to_csv(index=False)


def test_the_csv_is_written_in_blocks_with_progress_and_the_same_bytes(run, tmp_path, caplog, monkeypatch) -> None:
    # `recommend --users all --out` at 300k users x k=10 was one silent ~20 s write after the last ranking line
    from twotower.pipeline import results_csv
    from twotower.results import PAD_ID, Results

    rows = np.arange(len(run.user_vocab))[::-1].copy()
    res = recommend_users(run, rows, 5, None)
    ids, scores = res.ids.copy(), res.scores.copy()
    ids[1, 2:], scores[1, 2:] = PAD_ID, -np.inf  # a short list
    ids[4, :], scores[4, :] = PAD_ID, -np.inf  # an empty one
    res = Results(ids, scores)
    monkeypatch.setattr(results_csv, "WRITE_BLOCK_USERS", 7)
    parts: list[str] = []
    with caplog.at_level(logging.INFO, logger="twotower.pipeline.results_csv"):
        n = results_csv.write_results_csv(run, rows, res, parts.append, log_every_s=1e-9)
    assert "".join(parts) == _csv_by_hand(run, rows, res)
    assert n == int((ids != PAD_ID).sum()) and len(parts) == -(-rows.size // 7)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == len(parts) and lines[0].startswith(f"writing the CSV: 7 / {rows.size} users, ")
    empty: list[str] = []
    assert results_csv.write_results_csv(run, rows[:0], Results(ids[:0], scores[:0]), empty.append) == 0
    assert "".join(empty) == "user_id,item_id,rank,score\n"
    # the command: the same file as the one to_csv, and the same printed CSV without --out
    monkeypatch.setattr(results_csv, "WRITE_BLOCK_USERS", 3)
    out = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run.dir), "--users", "all", "--k", "4", "--out", str(out)]) == 0
    every = np.flatnonzero(run.history.lengths() > 0)
    seen = exclusions_from_files(run, [], include_seen=True)
    assert out.read_bytes() == _csv_by_hand(run, every, recommend_users(run, every, 4, seen)).encode("utf-8")
