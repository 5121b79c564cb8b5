"""`evaluate --history-from` embeds each user once, not once per ranked batch.

Known users read from input histories are embedded a whole USER_CHUNK at a time (so that recommend, evaluate and
serve compute a user's vector in the same batch, hence the same floats). Evaluation ranks 1,024 users a call, and
each call embedded the whole chunk again: 30,000 users of a 3-layer transformer took 190 s to evaluate where
`recommend --users all` ranked them in 28 s.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.synthetic import LOO_FAST, write_loo_split
from twotower.cli.main import main
from twotower.evaluation.protocol import EvalProtocol, evaluate
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.evaluate_run import RunScorer, run_matrices
from twotower.pipeline.histories import HistoryScorer, exclude_histories, read_input_histories
from twotower.pipeline.recommend import recommend_users


@pytest.fixture(scope="module")
def loo(tmp_path_factory):
    split = write_loo_split(tmp_path_factory.mktemp("loo"))
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["-q", "train", "--train", str(split / "train.csv"), "--valid", str(split / "valid.csv"),
                 "--test", str(split / "test.csv"), "--out", str(out), "--epochs", "1", "--no-eval",
                 "model.user.history=transformer", "model.user.seq_layers=1", *LOO_FAST]) == 0
    return split, TrainedRun.load(out)


@pytest.fixture
def embedded(monkeypatch):
    """The user rows each HistoryScorer.user_vectors call embedded."""
    calls: list[int] = []
    real = HistoryScorer.user_vectors

    def counting(self, users):
        calls.append(len(users))
        return real(self, users)

    monkeypatch.setattr(HistoryScorer, "user_vectors", counting)
    return calls


def test_evaluate_history_from_embeds_each_user_once(loo, embedded):
    split, run = loo
    histories = read_input_histories(run, [split / "train.csv", split / "valid.csv"])
    m = run_matrices(run)
    exclude = exclude_histories((m.train + m.valid).tocsr(), histories)
    # 30 users ranked 7 a call: 5 calls, each of which embedded all 30 users
    got = evaluate(RunScorer(run, histories), m.test, exclude, EvalProtocol(ks=(5,), batch_users=7))
    assert sum(embedded) == len(run.user_vocab)
    assert got["users_evaluated"] > 7


def test_cached_vectors_give_the_lists_of_a_fresh_computation(loo):
    """The second call reads the vectors the first one computed; they are the floats a new histories object
    (nothing cached) gives, so the lists are identical."""
    split, run = loo
    files = [split / "train.csv", split / "valid.csv"]
    histories = read_input_histories(run, files)
    rows = np.arange(len(run.user_vocab), dtype=np.int64)
    exclude = exclude_histories(None, histories)
    recommend_users(run, rows[:5], 10, exclude, histories=histories)  # fills the cache
    again = recommend_users(run, rows, 10, exclude, histories=histories)
    fresh = read_input_histories(run, files)
    want = recommend_users(run, rows, 10, exclude_histories(None, fresh), histories=fresh)
    np.testing.assert_array_equal(again.ids, want.ids)
    np.testing.assert_array_equal(again.scores, want.scores)
