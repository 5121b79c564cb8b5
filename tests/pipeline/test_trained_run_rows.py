"""TrainedRun's scoring methods take vocabulary rows: anything else is refused, never read as another entity."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from twotower.errors import DataError, NotFoundError
from twotower.pipeline.artifacts import TrainedRun

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> TrainedRun:
    return TrainedRun.load(build_tiny_run(tmp_path_factory.mktemp("rows")))


def test_external_item_ids_in_a_history_are_refused_not_cast_to_rows(run):
    # "5" and "7" as rows would be items i5 and i7 only by accident of naming; ids like "50" are other items
    with pytest.raises(NotFoundError, match=r"unknown item row '5'.*run.item_vocab.encode"):
        run.history_vectors([["5", "7"]])
    rows = run.item_vocab.encode(["i5", "i7"])
    assert run.history_vectors([rows]).shape == (1, run.item_embeddings().shape[1])


@pytest.mark.parametrize("bad", [-1, 60, 10**6])
def test_an_item_row_outside_the_catalogue_is_named(run, bad):
    with pytest.raises(NotFoundError, match=rf"unknown item row {bad} \(rows run 0\.\.59"):
        run.history_vectors([np.array([3, bad])])


@pytest.mark.parametrize("bad", [-1, 40])
def test_a_user_row_outside_the_vocabulary_is_named(run, bad):
    # -1 used to index from the end of the history offsets: a vector of no user, silently
    with pytest.raises(NotFoundError, match=rf"unknown user row {bad} \(rows run 0\.\.39"):
        run.user_vectors(np.array([0, bad]))
    with pytest.raises(NotFoundError, match=rf"unknown user row {bad}"):
        run.scores_for_users(np.array([bad]))
    with pytest.raises(NotFoundError, match=rf"unknown user row {bad}"):
        run.seen_rows(bad)


def test_non_integer_or_scalar_user_rows_are_refused(run):
    with pytest.raises(NotFoundError, match=r"unknown user row 1.5 \(rows are integers"):
        run.user_vectors(np.array([1.5]))
    with pytest.raises(DataError, match="1-D sequence of user rows"):
        run.user_vectors(3)


def test_valid_rows_still_score(run):
    assert run.user_vectors([0, 39]).shape[0] == 2
    assert run.user_vectors(np.array([], dtype=np.int64)).shape[0] == 0
    assert run.history_vectors([np.array([], dtype=np.int64)]).shape[0] == 1
    assert np.array_equal(run.seen_rows(np.int64(0)), run.history.of(0))


@pytest.mark.parametrize("bad", [-1, 60, 10**6])
def test_item_metadata_and_pair_scores_refuse_a_row_outside_the_catalogue(run, bad):
    # title(-1) named the last item and item_record(60) / score_pairs(..., [60]) failed with a bare IndexError;
    # score_pairs(..., [-1]) scored the last item
    for call in (lambda: run.title(bad), lambda: run.item_record(bad),
                 lambda: run.score_pairs(run.user_vectors([0])[0], np.array([0, bad]))):
        with pytest.raises(NotFoundError, match=rf"unknown item row {bad} \(rows run 0\.\.59"):
            call()


def test_item_metadata_refuses_an_external_id_or_a_fraction_for_a_row(run):
    for bad in ("i5", 1.5):
        with pytest.raises(NotFoundError, match=r"unknown item row .*rows are integers 0\.\.59.*item_vocab\.index"):
            run.title(bad)
        with pytest.raises(NotFoundError, match=r"unknown item row"):
            run.item_record(bad)


def test_valid_item_rows_still_give_metadata_and_scores(run):
    last = run.n_items - 1
    assert run.item_record(np.int64(last))["item_id"] == run.item_vocab.id_at(last)
    assert isinstance(run.title(0), str)
    assert run.score_pairs(run.user_vectors([0])[0], [0, last]).shape == (2,)


def test_the_minus_one_of_an_unknown_id_from_encode_is_explained(run):
    # the hint said "map external ids with run.user_vocab.encode(ids)", which is what gave the -1
    rows = run.user_vocab.encode(["u1", "nobody"])
    with pytest.raises(NotFoundError, match=r"unknown user row -1 \(rows run 0\.\.39; -1 is what "
                                            r"run\.user_vocab\.encode\(ids\) gives an id that is not among"):
        run.user_vectors(rows)
    with pytest.raises(NotFoundError, match=r"-1 is what run\.item_vocab\.encode\(ids\) gives"):
        run.history_vectors([run.item_vocab.encode(["i5", "no-such-item"])])


def test_a_run_folder_or_train_runs_tuple_instead_of_a_loaded_run_is_named(run):
    # tt.recommend("runs/ml", ...) failed with "AttributeError: 'str' object has no attribute 'fingerprint'",
    # evaluate_run with '... no attribute config', explain_recommendation with '... no attribute model'
    import twotower as tt
    from twotower.errors import ConfigError

    folder = str(run.dir)
    calls = {
        "recommend": lambda r: tt.recommend(r, ["u1"], k=3),
        "evaluate_run": lambda r: tt.evaluate_run(r, baselines=()),
        "explain": lambda r: tt.explain_recommendation(r, user_row=0, item_row=1),
    }
    for where, call in calls.items():
        with pytest.raises(ConfigError, match=rf"^{where}: run must be a loaded run \(tt.TrainedRun\), got a str; load "
                                              rf"the folder first: run = tt.TrainedRun.load\('{folder}'\)$"):
            call(folder)
        with pytest.raises(ConfigError, match=rf"^{where}: .*got a PosixPath; load the folder first"):
            call(run.dir)
        with pytest.raises(ConfigError, match=r"got a tuple; tt.train_run returns \(run, result, data\): unpack it"):
            call((run, None, None))
    assert tt.recommend(run, ["u1"], k=3)[0][0]["rank"] == 1  # a loaded run still works


def test_one_flat_history_is_refused_with_the_list_it_needs(run):
    # history_vectors(np.array([3, 5])) said "expected a 1-D sequence of item rows, got an array of 0 dimension(s):
    # np.int64(3)": each row was read as a user's history
    rows = np.array([3, 5])
    with pytest.raises(DataError, match=r"^histories takes one array of item rows per user \(a list of arrays\), got "
                                        r"one flat array of 2 item rows; for one user pass \[rows\]$"):
        run.history_vectors(rows)
    with pytest.raises(DataError, match="got one flat list of 2 item rows"):
        run.history_vectors([3, 5])
    assert run.history_vectors([rows]).shape == run.history_vectors(rows[None, :]).shape == (1, run.item_embeddings().shape[1])


def test_the_cached_item_embeddings_cannot_be_changed_in_place(run):
    # `items = run.item_embeddings(); items *= 2` changed the cache every later score and list reads, without a word
    items = run.item_embeddings()
    before = run.scores_for_users(np.array([0])).copy()
    with pytest.raises(ValueError, match="read-only"):
        items *= 2
    assert np.array_equal(run.scores_for_users(np.array([0])), before)
    mine = items.copy()
    mine *= 2  # a copy is the caller's to change
    assert np.allclose(mine, 2 * run.item_embeddings())


def test_a_user_id_from_a_float_column_finds_its_user(run, monkeypatch):
    # ids read from a float column (one NaN made pandas' int ids floats) train as "7"; user_row str()'d 7.0 to '7.0'
    # and tt.recommend(run, [7.0]) said "unknown user '7.0'", while item ids (vocab.index) were read as "7"
    from twotower.data import Vocabulary

    monkeypatch.setattr(run, "user_vocab", Vocabulary([str(i) for i in range(len(run.user_vocab))], kind="user"))
    assert run.user_row(7.0) == run.user_row(np.float64(7)) == run.user_row(7) == run.user_row("7") == 7


@pytest.mark.parametrize("bad", ["batch", "rows"])
def test_score_pairs_names_the_user_vector_it_takes(run, bad):
    # a [1, D] batch of one user (what user_vectors returns) or user rows gave numpy's matmul core-dimension error
    user = run.user_vectors([0]) if bad == "batch" else np.array([0])
    with pytest.raises(DataError, match=r"score_pairs takes one user vector of shape \(\d+,\), got shape"):
        run.score_pairs(user, np.array([0, 1]))
    assert run.score_pairs(run.user_vectors([0])[0], np.array([0, 1])).shape == (2,)
