"""--history-from: score a saved run from input histories read from files, without refitting.

The leave-one-out flow end to end on a small SASRec-format file: data split ->
train -> recommend/evaluate with the test input history (train + valid).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from tests.synthetic import LOO_FAST, write_loo_split
from twotower.cli.main import main
from twotower.errors import ConfigError
from twotower.evaluation.protocol import EvalProtocol, evaluate, topk_excluding
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.evaluate_run import evaluate_run
from twotower.pipeline.histories import HistoryScorer, read_input_histories

FAST = LOO_FAST


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory):
    """A SASRec-format file (integer ids, file order = time order) split leave-last-one-out by the CLI."""
    return write_loo_split(tmp_path_factory.mktemp("loo"))


def _train(split_dir, out, history: str) -> TrainedRun:
    rc = main(["-q", "train", "--train", str(split_dir / "train.csv"), "--valid", str(split_dir / "valid.csv"),
               "--test", str(split_dir / "test.csv"), "--out", str(out), "--epochs", "2", "--no-eval",
               f"model.user.history={history}", "model.user.seq_layers=1", "model.user.seq_dropout=0.0", *FAST])
    assert rc == 0
    return TrainedRun.load(out)


@pytest.fixture(scope="module", params=["recency", "transformer"])
def run(request, split_dir, tmp_path_factory):
    return _train(split_dir, tmp_path_factory.mktemp("run") / "run", request.param)


def _by_hand(split_dir, run, names) -> list[np.ndarray]:
    """Each run user's history rows: the files concatenated, each user's rows sorted by timestamp."""
    df = pd.concat([pd.read_csv(split_dir / n, dtype={"user_id": str, "item_id": str}) for n in names])
    df = df.sort_values(["user_id", "timestamp"], kind="stable")
    per_user = df.groupby("user_id")["item_id"].apply(list).to_dict()
    return [run.item_vocab.encode(per_user.get(u, [])) for u in run.user_vocab.ids]


def test_history_from_equals_embedding_the_concatenated_history(split_dir, run):
    users = np.arange(len(run.user_vocab))
    h = read_input_histories(run, [split_dir / "train.csv", split_dir / "valid.csv"])
    got = HistoryScorer(run, h).user_vectors(users)
    want = run.history_vectors(_by_hand(split_dir, run, ["train.csv", "valid.csv"]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the longer input changes the vectors (the valid item is now the newest); the train file alone does not
    assert not np.allclose(got, run.user_vectors(users), atol=1e-4)
    alone = HistoryScorer(run, read_input_histories(run, [split_dir / "train.csv"])).user_vectors(users)
    np.testing.assert_allclose(alone, run.user_vectors(users), rtol=1e-5, atol=1e-6)
    assert h.report["rows"] == 30 * 9 and h.report["users_with_history"] == 30


def test_recommend_cli_history_from(split_dir, run, tmp_path):
    out = tmp_path / "recs.csv"
    files = [str(split_dir / "train.csv"), str(split_dir / "valid.csv")]
    assert main(["-q", "recommend", "--run", str(run.dir), "--users", "all", "--history-from", *files,
                 "--exclude", *files, "--k", "5", "--out", str(out)]) == 0
    recs = pd.read_csv(out, dtype={"user_id": str, "item_id": str})
    assert list(recs.columns) == ["user_id", "item_id", "rank", "score"]
    assert len(recs) == 30 * 5
    hand = _by_hand(split_dir, run, ["train.csv", "valid.csv"])
    scores = run.history_vectors(hand) @ run.item_embeddings().T  # [U, I]
    rows = np.repeat(np.arange(len(hand)), [len(x) for x in hand])
    seen = sp.csr_matrix((np.ones(len(rows)), (rows, np.concatenate(hand))), shape=scores.shape)
    top = topk_excluding(scores, 5, seen)
    for u, uid in enumerate(run.user_vocab.ids):
        got = recs.loc[recs["user_id"] == uid].sort_values("rank")["item_id"].tolist()
        assert got == [run.item_vocab.ids[i] for i in top[u]]
        assert not set(got) & {run.item_vocab.ids[i] for i in hand[u]}  # no input item is recommended
    # --user takes the same path
    uid = run.user_vocab.ids[3]
    assert main(["-q", "recommend", "--run", str(run.dir), "--user", uid, "--history-from", *files, "--k", "5",
                 "--json"]) == 0


def test_evaluate_cli_history_from(split_dir, run, capsys):
    files = [str(split_dir / "train.csv"), str(split_dir / "valid.csv")]
    capsys.readouterr()
    assert main(["-q", "evaluate", "--run", str(run.dir), "--history-from", *files, "--baselines", "popularity",
                 "--ks", "5,10", "--json"]) == 0
    rows = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    hand = _by_hand(split_dir, run, ["train.csv", "valid.csv"])

    class ByHand:
        def score(self, users):
            return run.history_vectors([hand[u] for u in users]) @ run.item_embeddings().T

    test = pd.read_csv(split_dir / "test.csv", dtype={"user_id": str, "item_id": str})
    n_u, n_i = len(run.user_vocab), run.n_items
    rel = sp.csr_matrix((np.ones(len(test)), (run.user_vocab.encode(test["user_id"]), run.item_vocab.encode(test["item_id"]))),
                        shape=(n_u, n_i))
    rows_h = np.repeat(np.arange(n_u), [len(x) for x in hand])
    seen = sp.csr_matrix((np.ones(len(rows_h)), (rows_h, np.concatenate(hand))), shape=(n_u, n_i))
    want = evaluate(ByHand(), rel, seen, EvalProtocol(ks=(5, 10)))
    for key in ("HitRate@10", "NDCG@10", "Recall@5", "NDCG@5"):
        assert rows["two-tower"][key] == pytest.approx(want[key], abs=1e-9), key
    assert rows["two-tower"]["users_evaluated"] == 30
    # the table form names the input
    assert main(["-q", "evaluate", "--run", str(run.dir), "--history-from", *files, "--baselines", "",
                 "--ks", "10"]) == 0
    out = capsys.readouterr().out
    assert "input history from" in out
    # the footer says what was read, not the train-only protocol of a plain evaluation
    footer = out.strip().splitlines()[-1]
    assert footer.startswith("protocol:") and "valid.csv" in footer and "history the user tower reads" not in footer


def test_history_order_ties_duplicates_and_unknowns(split_dir, run, tmp_path):
    a = tmp_path / "a.csv"
    b = tmp_path / "b.csv"
    u = run.user_vocab.ids[0]
    i1, i2, i3 = run.item_vocab.ids[2], run.item_vocab.ids[1], run.item_vocab.ids[0]
    # same timestamp 5 for i1 (file a) and i2 (file b): the tie goes to the smaller item row (i2), like the split
    a.write_text(f"user_id,item_id,timestamp\n{u},{i1},5\n{u},{i3},9\n{u},nope,1\nghost,{i1},1\n")
    b.write_text(f"user_id,item_id,timestamp\n{u},{i2},5\n{u},{i3},9\n")
    h = read_input_histories(run, [a, b])
    assert [run.item_vocab.ids[i] for i in h.sequences.of(0)] == [i2, i1, i3]
    assert h.report["duplicates_dropped"] == 1
    assert h.report["rows_unknown_item"] == 1 and h.report["rows_unknown_user"] == 1
    assert h.users().tolist() == [0]


def test_history_rows_apart_by_a_floored_fraction_are_two_events(split_dir, run, tmp_path):
    # the reader keeps both clicks (9.25 and 9.75 floor to 9); the files' merge dropped the second as a repeat
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    u, i1, i3 = run.user_vocab.ids[0], run.item_vocab.ids[2], run.item_vocab.ids[0]
    a.write_text(f"user_id,item_id,timestamp\n{u},{i1},5\n{u},{i3},9.25\n{u},{i3},9.75\n")
    b.write_text(f"user_id,item_id,timestamp\n{u},{i3},9.25\n")  # a repeat of file a's row: dropped
    h = read_input_histories(run, [a, b])
    assert [run.item_vocab.ids[i] for i in h.sequences.of(0)] == [i1, i3, i3]
    assert h.report["duplicates_dropped"] == 1


def test_a_user_without_rows_in_the_history_files_is_said_to_be_ranked_from_an_empty_history(split_dir, run,
                                                                                             tmp_path, capsys):
    # a user asked for by id with no row in the --history-from files was ranked from an empty history (for a
    # history-only tower every score 0.000, the catalogue in row order) without a word
    valid = pd.read_csv(split_dir / "valid.csv", dtype=str)
    uid = run.user_vocab.ids[3]
    valid[valid["user_id"] != uid].to_csv(tmp_path / "others.csv", index=False)
    capsys.readouterr()
    assert main(["-q", "recommend", "--run", str(run.dir), "--user", uid, "--history-from",
                 str(tmp_path / "others.csv"), "--k", "5", "--json"]) == 0
    err = capsys.readouterr().err
    assert (f"1 of 1 users have no rows of known items in the --history-from files (e.g. user {uid}): each is ranked from an "
            "empty input history, not from their training history") in err
    other = run.user_vocab.ids[4]
    assert main(["-q", "recommend", "--run", str(run.dir), "--users", f"{other},{uid}", "--history-from",
                 str(tmp_path / "others.csv"), "--k", "5", "--out", str(tmp_path / "r.csv")]) == 0
    assert f"1 of 2 users have no rows of known items in the --history-from files (e.g. user {uid})" in capsys.readouterr().err
    assert main(["-q", "recommend", "--run", str(run.dir), "--user", other, "--history-from",
                 str(tmp_path / "others.csv"), "--k", "5", "--json"]) == 0
    assert "no rows of known items in the --history-from files" not in capsys.readouterr().err


def test_tt_recommend_logs_a_user_without_rows_in_the_history_files(split_dir, run, tmp_path, caplog):
    # `recommend --history-from` and POST /recommend say such a user is ranked from an empty history; from Python
    # the empty-history list came back without a word
    import twotower as tt

    valid = pd.read_csv(split_dir / "valid.csv", dtype=str)
    uid, other = run.user_vocab.ids[3], run.user_vocab.ids[4]
    valid[valid["user_id"] != uid].to_csv(tmp_path / "others.csv", index=False)
    with caplog.at_level("WARNING", logger="twotower"):
        tt.recommend(run, [other, uid], k=5, history_from=tmp_path / "others.csv")
    assert (f"1 of 2 users have no rows of known items in the history_from files (e.g. user {uid}): each is ranked "
            "from an empty input history, not from their training history") in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower"):
        tt.recommend(run, [other], k=5, history_from=tmp_path / "others.csv")
    assert "no rows of known items" not in caplog.text


def test_a_user_whose_history_rows_are_all_unknown_items_is_told_so_not_that_the_files_lack_them(run, tmp_path,
                                                                                                 capsys):
    # a user whose only rows name items the run never saw was told "no rows in the --history-from files",
    # which sends them looking for a misspelt file or user id when the rows were there and dropped
    uid = run.user_vocab.ids[3]
    (tmp_path / "h.csv").write_text(f"user_id,item_id,timestamp\n{uid},never-seen-item,5\n")
    capsys.readouterr()
    assert main(["-q", "recommend", "--run", str(run.dir), "--user", uid, "--history-from",
                 str(tmp_path / "h.csv"), "--k", "5", "--json"]) == 0
    assert (f"1 of 1 users have no rows of known items in the --history-from files (e.g. user {uid})"
            in capsys.readouterr().err)


def test_history_from_with_history_is_refused(run, split_dir, capsys):
    assert main(["-q", "recommend", "--run", str(run.dir), "--history", run.item_vocab.ids[0],
                 "--history-from", str(split_dir / "train.csv")]) == 2
    assert "--history-from" in capsys.readouterr().err


def test_evaluate_warns_when_targets_are_in_the_input(split_dir, run, caplog):
    from twotower.pipeline.evaluate_run import evaluate_run

    files = [split_dir / "train.csv", split_dir / "valid.csv"]
    with caplog.at_level("WARNING", logger="twotower.pipeline.evaluate_run"):
        rows = evaluate_run(run, split="valid", baselines=(), ks=(10,), history_from=files)
    assert rows[0]["HitRate@10"] == 0.0  # every valid target is an input item, hence excluded
    assert "30 of 30 valid pairs are in the input history" in caplog.text


def test_a_repeat_of_an_input_item_is_warned_about_once(split_dir, run, tmp_path, caplog):
    """A test item the user already had in train (a repeat, common in session data), with --history-from train.csv
    valid.csv: one warning, not one for the excluded train + valid history and a second for the input history."""
    from twotower.pipeline.evaluate_run import evaluate_run

    train = pd.read_csv(split_dir / "train.csv", dtype=str)
    test = pd.read_csv(split_dir / "test.csv", dtype=str)
    first = test["user_id"].iloc[0]
    test.loc[0, "item_id"] = train.loc[train["user_id"] == first, "item_id"].iloc[0]  # a repeat of a train item
    test.to_csv(tmp_path / "test.csv", index=False)
    with caplog.at_level("WARNING", logger="twotower.pipeline.evaluate_run"):
        evaluate_run(run, split="test", baselines=(), ks=(10,), test_file=tmp_path / "test.csv",
                     history_from=[split_dir / "train.csv", split_dir / "valid.csv"])
    said = [r.getMessage() for r in caplog.records if "never hit" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(
        "1 of 30 test pairs is in the train + valid history, which is excluded from ranking, so it is never hit"), said


def test_evaluate_test_file_and_ease_limit(split_dir, tmp_path, capsys, caplog):
    """`evaluate --test FILE` scores a held-out file the run was not given; EASE above its dense item limit is
    solved low-rank (its row says so), and above the low-rank limit too it is skipped with a warning naming the
    limits, the other rows unchanged."""
    out = tmp_path / "run"
    assert main(["-q", "train", "--train", str(split_dir / "train.csv"), "--valid", str(split_dir / "valid.csv"),
                 "--out", str(out), "--epochs", "1", "--no-eval", *FAST]) == 0
    files = [str(split_dir / "train.csv"), str(split_dir / "valid.csv")]
    capsys.readouterr()
    assert main(["-q", "evaluate", "--run", str(out), "--baselines", "", "--ks", "10"]) != 0
    err = capsys.readouterr().err
    assert "no test split" in err and "twotower evaluate --test FILE" in err  # and how to give one
    assert main(["-q", "evaluate", "--run", str(out), "--test", str(split_dir / "test.csv"), "--history-from", *files,
                 "--baselines", "popularity,ease", "--ks", "10", "--json"]) == 0
    rows = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["two-tower"]["users_evaluated"] == 30 and any(m.startswith("ease") for m in rows)
    caplog.clear()
    assert main(["-q", "evaluate", "--run", str(out), "--test", str(split_dir / "test.csv"), "--history-from", *files,
                 "--baselines", "popularity,ease", "--ks", "10", "--json", "--ease-max-items", "5"]) == 0
    low_rank = {r["model"]: r for r in json.loads(capsys.readouterr().out)}  # was: no EASE row at all
    assert any(m.startswith("ease (low-rank, ") for m in low_rank) and "EASE skipped" not in caplog.text
    assert main(["-q", "evaluate", "--run", str(out), "--test", str(split_dir / "test.csv"), "--history-from", *files,
                 "--baselines", "popularity,ease", "--ks", "10", "--json", "--ease-max-items", "5",
                 "--ease-low-rank-max-items", "5"]) == 0
    limited = {r["model"]: r for r in json.loads(capsys.readouterr().out)}
    assert not any(m.startswith("ease") for m in limited)
    assert limited["two-tower"]["NDCG@10"] == rows["two-tower"]["NDCG@10"]
    assert "EASE skipped" in caplog.text and "ease_max_items=5" in caplog.text
    assert "eval.ease_low_rank_max_items=5" in caplog.text and "--ease-low-rank-max-items N" in caplog.text
    assert main(["-q", "evaluate", "--run", str(out), "--test", str(split_dir / "test.csv"), "--split", "valid"]) != 0
    assert "--test FILE is the test split" in capsys.readouterr().err


def _without_timestamps(split_dir, tmp_path, name: str):
    df = pd.read_csv(split_dir / name, dtype={"user_id": str, "item_id": str})
    df = df.sort_values(["user_id", "timestamp"], kind="stable")[["user_id", "item_id"]]  # time order, no times
    path = tmp_path / name
    df.to_csv(path, index=False)
    return path


def test_files_without_timestamps_give_the_files_in_order(split_dir, run, tmp_path):
    """Row numbers are not times: the history is train's rows, then valid's, as a concatenation would be."""
    train, valid = (_without_timestamps(split_dir, tmp_path, n) for n in ("train.csv", "valid.csv"))
    h = read_input_histories(run, [train, valid])
    hand = _by_hand(split_dir, run, ["train.csv", "valid.csv"])
    for row in range(len(run.user_vocab)):
        np.testing.assert_array_equal(h.sequences.of(row), hand[row])


def test_mixing_files_with_and_without_timestamps_is_refused(split_dir, run, tmp_path, capsys):
    valid = _without_timestamps(split_dir, tmp_path, "valid.csv")
    with pytest.raises(Exception, match="valid.csv has no timestamp column while the other files do"):
        read_input_histories(run, [split_dir / "train.csv", valid])
    rc = main(["-q", "recommend", "--run", str(run.dir), "--user", run.user_vocab.ids[0],
               "--history-from", str(split_dir / "train.csv"), str(valid)])
    assert rc == 2 and "no timestamp column" in capsys.readouterr().err


def test_files_in_different_time_units_are_refused(split_dir, run, tmp_path):
    """Epoch seconds beside epoch milliseconds: each file's rows would sort before all of the other's."""
    seconds, millis = tmp_path / "s.csv", tmp_path / "ms.csv"
    df = pd.read_csv(split_dir / "valid.csv", dtype={"user_id": str, "item_id": str})
    df.assign(timestamp=1_714_521_600 + df["timestamp"]).to_csv(seconds, index=False)
    df.assign(timestamp=1_714_521_600_000 + df["timestamp"]).to_csv(millis, index=False)
    with pytest.raises(Exception, match="different units") as e:
        read_input_histories(run, [seconds, millis])
    assert "s.csv: epoch seconds" in str(e.value) and "ms.csv: epoch milliseconds" in str(e.value)


def test_evaluate_warns_when_the_test_file_is_not_held_out(split_dir, run, caplog):
    """`evaluate --test valid.csv`: every pair is in the excluded train + valid history; the zeros are explained."""
    from twotower.pipeline.evaluate_run import evaluate_run

    with caplog.at_level("WARNING", logger="twotower.pipeline.evaluate_run"):
        rows = evaluate_run(run, baselines=(), ks=(10,), test_file=split_dir / "valid.csv")
    assert rows[0]["HitRate@10"] == 0.0
    assert "30 of 30 test pairs are in the train + valid history" in caplog.text and "held out?" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.evaluate_run"):
        evaluate_run(run, baselines=(), ks=(10,))  # the run's own test split: nothing to say
    assert "history, which is excluded" not in caplog.text


def test_python_history_from_takes_one_path_alone(split_dir, run):
    train = split_dir / "train.csv"
    one = read_input_histories(run, str(train))  # its characters used to be read as file names ("file s: not found")
    assert one.files == read_input_histories(run, [train]).files
    alone = evaluate_run(run, split="valid", baselines=(), history_from=train)[0]
    assert alone["NDCG@10"] == evaluate_run(run, split="valid", baselines=(), history_from=[train])[0]["NDCG@10"]


def _frame(split_dir, name):
    return pd.read_csv(split_dir / name, dtype={"user_id": str, "item_id": str})


def test_python_history_from_takes_dataframes_as_it_takes_files(split_dir, run):
    """A Python user has frames: one alone, or in the list beside paths, reads as its file would."""
    train, valid = split_dir / "train.csv", split_dir / "valid.csv"
    by_files = read_input_histories(run, [train, valid])
    for given in ([_frame(split_dir, "train.csv"), _frame(split_dir, "valid.csv")], [_frame(split_dir, "train.csv"), valid]):
        h = read_input_histories(run, given)
        np.testing.assert_array_equal(h.sequences.indptr, by_files.sequences.indptr)
        np.testing.assert_array_equal(h.sequences.items, by_files.sequences.items)
        assert h.report["rows"] == by_files.report["rows"]
    assert read_input_histories(run, [_frame(split_dir, "train.csv"), valid]).files == (
        "<DataFrame history_from[0]>", str(valid))
    alone = read_input_histories(run, _frame(split_dir, "train.csv"))
    np.testing.assert_array_equal(alone.sequences.items, read_input_histories(run, train).sequences.items)
    want = evaluate_run(run, split="test", baselines=("popularity",), history_from=[train, valid])
    got = evaluate_run(run, split="test", baselines=("popularity",), history_from=[_frame(split_dir, "train.csv"), valid])
    assert [r["NDCG@10"] for r in got] == [r["NDCG@10"] for r in want]


def test_tt_recommend_takes_history_from_as_the_cli_does(split_dir, run, capsys):
    import twotower as tt

    train, valid = split_dir / "train.csv", split_dir / "valid.csv"
    user = run.user_vocab.ids[3]
    assert main(["-q", "recommend", "--run", str(run.dir), "--user", user, "--k", "5", "--json",
                 "--history-from", str(train), str(valid)]) == 0
    want = json.loads(capsys.readouterr().out)["items"]
    assert tt.recommend(run, [user], k=5, history_from=[train, valid])[0] == want
    assert tt.recommend(run, [user], k=5, history_from=[_frame(split_dir, "train.csv"), _frame(split_dir, "valid.csv")])[0] == want
    with pytest.raises(ConfigError, match="use one or the other"):
        tt.recommend(run, history=["1"], history_from=train)


def test_a_bad_frame_is_named_by_its_position_row_and_column(split_dir, run):
    from twotower.errors import DataError

    train, valid = split_dir / "train.csv", _frame(split_dir, "valid.csv")
    with pytest.raises(DataError, match=r"<DataFrame history_from\[1\]>.*'user_id'.*not found"):
        read_input_histories(run, [train, valid.rename(columns={"user_id": "uid"})])
    bad = valid.astype({"timestamp": object})
    bad.loc[bad.index[2], "timestamp"] = "yesterday"
    with pytest.raises(DataError) as e:
        read_input_histories(run, [train, bad])
    assert e.value.file == "<DataFrame history_from[1]>" and e.value.row == 2 and e.value.column == "timestamp"
    assert "iloc 2" in str(e.value)
    with pytest.raises(DataError, match=r"<DataFrame history_from\[0\]> has no timestamp column"):
        read_input_histories(run, [valid.drop(columns="timestamp"), train])
    with pytest.raises(ConfigError, match=r"history_from\[1\]: expected an interaction file path or a pandas "
                                          r"DataFrame, got int"):
        read_input_histories(run, [train, 3])
    with pytest.raises(ConfigError, match="got dict"):
        evaluate_run(run, split="valid", baselines=(), history_from={"train": valid})


def test_evaluate_table_says_how_many_held_out_users_it_averages_over(split_dir, run, tmp_path, capsys):
    """Sparse data: held-out rows naming an item (or user) that never occurs in train are skipped by every model;
    the table said nothing of it, so its figures read as over the whole file (e.g. 14 of 111 Book-Crossing users)."""
    test = pd.read_csv(split_dir / "test.csv", dtype={"user_id": str, "item_id": str})
    cold = test.iloc[:3].assign(item_id=["new1", "new2", "new3"])  # three users whose only test item is new
    stranger = test.iloc[:1].assign(user_id="nobody")  # and a user the run never saw
    pd.concat([test.iloc[3:], cold, stranger]).to_csv(tmp_path / "sparse_test.csv", index=False)
    capsys.readouterr()
    assert main(["-q", "evaluate", "--run", str(run.dir), "--test", str(tmp_path / "sparse_test.csv"),
                 "--baselines", "popularity", "--ks", "10"]) == 0
    out = capsys.readouterr().out
    assert "users: 27 of 31 held-out users evaluated; the other 4 are skipped, not counted as misses" in out
    assert "scale by 0.8710" in out
    assert main(["-q", "evaluate", "--run", str(run.dir), "--baselines", "popularity", "--ks", "10", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["users_evaluated"], r["users_held_out"]) for r in rows} == {(30, 30)}
    assert main(["-q", "evaluate", "--run", str(run.dir), "--baselines", "", "--ks", "10"]) == 0
    assert "users: all 30 held-out users evaluated" in capsys.readouterr().out


def test_evaluate_history_from_ranks_through_the_index_recommend_uses(split_dir, run, monkeypatch):
    """`evaluate --history-from` ranks with the index `recommend --history-from` ranks with, as plain `evaluate`
    does; it used a matrix product of its own, whose last float bits can swap a near-tie at the cut (ML-100K:
    HitRate@20 0.5567 with --history-from train.csv, 0.5578 without, for the same histories). The index here
    lists the eligible items by ascending row, so the figures can only come from it."""
    from twotower.pipeline.evaluate_run import run_matrices
    from twotower.pipeline.histories import exclude_histories
    from twotower.results import Results

    class Ascending:
        def search(self, queries, k, exclude=None):
            ids = np.full((len(queries), k), -1, dtype=np.int64)
            for q in range(len(queries)):
                banned = set() if exclude is None else set(np.asarray(exclude[q]).tolist())
                rows = [i for i in range(run.n_items) if i not in banned][:k]
                ids[q, : len(rows)] = rows
            return Results(ids, np.zeros(ids.shape, np.float32))

    monkeypatch.setattr("twotower.pipeline.recommend.open_run_index", lambda *a, **kw: (Ascending(), "ascending"))
    files = [split_dir / "train.csv", split_dir / "valid.csv"]
    got = evaluate_run(run, history_from=files, baselines=(), ks=(5, 10))[0]

    class AscendingScores:  # the same lists from scores: item row i scores -i
        def score(self, users):
            return np.tile(-np.arange(run.n_items, dtype=np.float32), (len(users), 1))

    m = run_matrices(run)
    exclude = exclude_histories((m.train + m.valid).tocsr(), read_input_histories(run, files))
    want = evaluate(AscendingScores(), m.test, exclude, EvalProtocol(ks=(5, 10)))
    for key in ("HitRate@5", "NDCG@10", "Recall@10", "MRR@10"):
        assert got[key] == pytest.approx(want[key], abs=1e-12), key


def test_train_table_on_a_leave_last_split_says_how_to_read_train_plus_valid(split_dir, tmp_path, capsys):
    """`train --test` scores test users from their train history only; on a leave-one-out split it says how to
    get the protocol's test input (train + valid), and on another split it says nothing of it."""
    args = ["train", "--valid", str(split_dir / "valid.csv"), "--test", str(split_dir / "test.csv"),
            "--epochs", "1", "eval.baselines=[]", *FAST]  # without -q: the hint is an information line
    capsys.readouterr()
    assert main([*args, "--train", str(split_dir / "train.csv"), "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    hint = f"--history-from {split_dir / 'train.csv'} {split_dir / 'valid.csv'}"
    assert "test users read their train history only" in out and hint in out
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.csv").write_bytes((split_dir / "train.csv").read_bytes())  # no split_report.json beside it
    assert main([*args, "--train", str(other / "train.csv"), "--out", str(tmp_path / "b")]) == 0
    assert "test users read their train history only" not in capsys.readouterr().out
    # split by train itself (--data FILE data.split=leave_last): the run's own copy of the split is named
    seq = split_dir.parent / "seq.txt"
    assert main(["train", "--data", str(seq), "data.split=leave_last", "data.leave_n=1", "--epochs", "1",
                 "eval.baselines=[]", *FAST, "--out", str(tmp_path / "c")]) == 0
    run_data = tmp_path / "c" / "data"
    assert (f"`twotower evaluate --run {tmp_path / 'c'} --history-from {run_data / 'train.csv'} "
            f"{run_data / 'valid.csv'}`") in capsys.readouterr().out
    # a bare resume reads the run's copies; the hint still names the files the run was given (the split's)
    assert main(["train", "--out", str(tmp_path / "a"), "--resume", "--epochs", "2"]) == 0
    assert hint in capsys.readouterr().out
    assert main(["train", "--out", str(tmp_path / "c"), "--resume", "--epochs", "2"]) == 0
    assert f"--history-from {run_data / 'train.csv'} {run_data / 'valid.csv'}" in capsys.readouterr().out
    # -q prints the table and leaves the hint out, as the other information lines
    assert main(["-q", "train", "--out", str(tmp_path / "c"), "--resume", "--epochs", "3"]) == 0
    out = capsys.readouterr().out
    assert "protocol: " in out and "test users read their train history only" not in out


def test_valid_and_test_naming_one_file_is_warned_about_and_gets_no_history_hint(split_dir, tmp_path, capsys,
                                                                                   caplog):
    """--valid and --test naming one file: early stopping read the test split in silence, and the closing hint
    then suggested reading each test user's test item as input history (--history-from train.csv test.csv)."""
    test = split_dir / "test.csv"
    with caplog.at_level("WARNING"):
        assert main(["train", "--train", str(split_dir / "train.csv"), "--valid", str(test), "--test",
                     str(split_dir / ".." / split_dir.name / "test.csv"), "--epochs", "1", "eval.baselines=[]", *FAST,
                     "--out", str(tmp_path / "a")]) == 0
    assert f"data.valid and data.test are the same file ({test})" in caplog.text
    assert "test users read their train history only" not in capsys.readouterr().out


def test_train_from_a_config_file_naming_a_leave_last_split_says_how_to_read_train_plus_valid(split_dir, tmp_path,
                                                                                               capsys):
    """The split's files named in a config file (`[data] train = ".../train.csv"`), as the README's config section
    writes them, get the leave-one-out hint too: it was printed for the --train / --valid flags alone."""
    config = tmp_path / "loo.toml"
    config.write_text("[data]\n" + "".join(f'{part} = "{split_dir / (part + ".csv")}"\n'
                                           for part in ("train", "valid", "test")), encoding="utf-8")
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "a"), "--epochs", "1",
                 "eval.baselines=[]", *FAST]) == 0
    out = capsys.readouterr().out
    assert "test users read their train history only" in out
    assert f"--history-from {split_dir / 'train.csv'} {split_dir / 'valid.csv'}" in out


def _tiny_movielens(folder, seq) -> None:
    """MovieLens-100K's GroupLens files (u.data, u.item, u.user) holding the interactions of ``seq`` ("user item"
    lines, file order = time order): what `--dataset movielens-100k` reads, small."""
    from twotower.data.movielens import MOVIELENS_GENRES

    pairs = [line.split() for line in seq.read_text(encoding="utf-8").split("\n") if line.strip()]
    folder.mkdir(parents=True)
    (folder / "u.data").write_text("".join(f"{u}\t{i}\t4\t{881250000 + t}\n" for t, (u, i) in enumerate(pairs)))
    genres = "|".join("1" if g == "Drama" else "0" for g in MOVIELENS_GENRES)
    (folder / "u.item").write_text("".join(f"{i}|Film {i} (1995)|01-Jan-1995||http://x|{genres}\n"
                                           for i in sorted({i for _, i in pairs}, key=int)), encoding="latin-1")
    (folder / "u.user").write_text("".join(f"{u}|30|F|other|12345\n" for u in sorted({u for u, _ in pairs}, key=int)))


def test_train_on_the_dataset_split_leave_last_says_how_to_read_train_plus_valid(split_dir, tmp_path, capsys,
                                                                                  monkeypatch):
    """`train --dataset movielens-100k data.split=leave_last` splits leave-one-out into the run's data/ as `--data
    FILE data.split=leave_last` does, yet its table ended without the hint on the test input (train + valid)."""
    from twotower.data import movielens

    _tiny_movielens(tmp_path / "ml", split_dir.parent / "seq.txt")
    monkeypatch.setattr(movielens, "fetch_movielens_100k", lambda *a, **kw: tmp_path / "ml")
    capsys.readouterr()
    assert main(["train", "--dataset", "movielens-100k", "data.split=leave_last", "data.leave_n=1", "--epochs", "1",
                 "eval.baselines=[]", *FAST, "--out", str(tmp_path / "run")]) == 0
    run_data = tmp_path / "run" / "data"
    assert (f"`twotower evaluate --run {tmp_path / 'run'} --history-from {run_data / 'train.csv'} "
            f"{run_data / 'valid.csv'}`") in capsys.readouterr().out


def test_evaluate_says_how_many_evaluated_users_have_no_input_history(split_dir, run, tmp_path, caplog):
    """`evaluate --history-from` with files lacking some users (another user set, ids that lost their leading
    zeros) ranked them from empty histories without a word, under a protocol line saying each user's history came
    from the files; `recommend --history-from` said so. The count is in every row (--json) too."""
    valid = pd.read_csv(split_dir / "valid.csv", dtype=str)
    train = pd.read_csv(split_dir / "train.csv", dtype=str)
    kept = set(run.user_vocab.ids[:10])
    train[train["user_id"].isin(kept)].to_csv(tmp_path / "some.csv", index=False)
    with caplog.at_level("WARNING", logger="twotower.pipeline.evaluate_run"):
        rows = evaluate_run(run, baselines=("popularity",), ks=(10,), history_from=[tmp_path / "some.csv"])
    test_users = set(pd.read_csv(split_dir / "test.csv", dtype=str)["user_id"])
    empty = len(test_users - kept)
    assert empty > 0 and {r["users_empty_input_history"] for r in rows} == {empty}
    assert f"{empty} of {len(test_users)} evaluated users have no rows of known items in the history files" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.evaluate_run"):
        rows = evaluate_run(run, baselines=(), ks=(10,), history_from=[split_dir / "train.csv", split_dir / "valid.csv"])
    assert rows[0]["users_empty_input_history"] == 0 and "no rows of known items" not in caplog.text
    assert len(valid)  # the split has a valid file: the test rows' inputs are train + valid


def test_rows_of_unknown_users_in_an_exclude_file_are_counted_not_dropped_silently(run, tmp_path, caplog):
    """`recommend --exclude FILE` dropped rows naming ids the run does not know without a word, so the pairs the
    file meant to exclude (ids that lost their leading zeros) were recommended."""
    from twotower.pipeline.recommend import exclusions_from_files

    item = run.item_vocab.ids[0]
    (tmp_path / "x.csv").write_text(f"user_id,item_id,timestamp\n{run.user_vocab.ids[0]},{item},1\nnobody,{item},2\n"
                                    f"{run.user_vocab.ids[1]},no-such-item,3\n")
    with caplog.at_level("WARNING", logger="twotower.pipeline.recommend"):
        m = exclusions_from_files(run, [tmp_path / "x.csv"], include_seen=False)
    assert m.nnz == 1
    assert ("2 of 3 rows dropped (1 row of an unknown user, 1 row of an unknown item: not in this run's vocabularies, "
            "so nothing of them is excluded), e.g. user 'nobody'") in caplog.text


def test_explain_by_id_takes_history_from_as_the_cli_does(split_dir, run, capsys):
    """`twotower explain --history-from` had no Python equivalent (explain_by_id(history_from=...) was a TypeError)."""
    import twotower as tt

    files = [str(split_dir / "train.csv"), str(split_dir / "valid.csv")]
    uid, item = run.user_vocab.ids[2], run.item_vocab.ids[5]
    capsys.readouterr()
    assert main(["-q", "explain", "--run", str(run.dir), "--user", uid, "--item", item, "--history-from", *files,
                 "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    got = tt.explain_by_id(run, user_id=uid, item_id=item, history_from=files)
    assert (got["score"], got["text"], got["rank"]) == (cli["score"], cli["text"], cli["rank"])
    assert got["score"] != tt.explain_by_id(run, user_id=uid, item_id=item)["score"]  # the valid item is read too
    with pytest.raises(ConfigError, match="history_from reads known users' histories"):
        tt.explain_by_id(run, history=[item], item_id=item, history_from=files)
