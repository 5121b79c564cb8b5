"""`twotower evaluate --json` (and `--csv`) carry the counts of held-out rows and pairs its warnings give: the rows
dropped for naming an unknown user or item, and the pairs that can never be hit (in the excluded train + valid
history, or in the --history-from input history). The JSON said only `users_held_out` and `users_evaluated`, so a
saved table averaged over fewer pairs than its file held, without a word of how many or why."""
from __future__ import annotations

import csv
import io
import json
import re

import pandas as pd
import pytest

from tests.synthetic import write_dataset_with_cold_items
from twotower.cli.main import main

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
        "model.item.out_dim=8", "model.user.history_len=4", "train.threads=1", "--no-progress", "--no-eval"]
EVAL = ["--baselines", "popularity", "--ks", "5", "--threads", "1"]
COLD = ["i0", "i11", "i12"]  # items in no train or valid row (in the vocabulary by the item table): --segments' parts


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval-json-counts")
    paths = write_dataset_with_cold_items(d / "data", COLD, n_users=30, n_items=24, per_user=10)
    out = d / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--items", str(paths["items"]), "--out", str(out), "--epochs", "1", *FAST]) == 0
    # the test split, 3 pairs already in train, 1 in valid, 2 rows of an unknown user and 1 of an unknown item
    test, train, valid = (pd.read_csv(paths[n]) for n in ("test", "train", "valid"))
    unknown = pd.DataFrame([("nobody", "i1", 9_999_999, 4.0), ("nobody", "i2", 9_999_999, 4.0),
                            ("u1", "no-such-item", 9_999_999, 4.0)], columns=test.columns)
    held = pd.concat([test, train.iloc[[0, 11, 22]], valid.iloc[[0]], unknown], ignore_index=True)
    held.to_csv(d / "held.csv", index=False)
    return out, d / "held.csv", paths


def _said(text: str) -> dict[str, int]:
    """The counts the warnings give, as numbers."""
    dropped = re.search(r"dropped (\d+) of (\d+) rows: (\d+) users? outside the run's vocabularies.*?; (\d+) items? "
                        r"outside", text)
    seen = re.search(r"(\d+) of (\d+) test pairs (?:is|are) in the train \+ valid history", text)
    assert dropped and seen, text
    return {"held_out_rows_dropped": int(dropped[1]), "held_out_rows": int(dropped[2]),
            "held_out_unknown_users": int(dropped[3]), "held_out_unknown_items": int(dropped[4]),
            "held_out_pairs_excluded_as_seen": int(seen[1]), "held_out_pairs": int(seen[2])}


def test_the_json_rows_carry_the_counts_the_text_gives(setup, capsys, caplog):
    run, held, _ = setup
    assert main(["evaluate", "--run", str(run), "--test", str(held), *EVAL]) == 0
    text = _said(caplog.text)
    assert text == {"held_out_rows_dropped": 3, "held_out_rows": len(pd.read_csv(held)), "held_out_unknown_users": 1,
                    "held_out_unknown_items": 1, "held_out_pairs_excluded_as_seen": 4,
                    "held_out_pairs": len(pd.read_csv(held)) - 3}
    capsys.readouterr()
    caplog.clear()
    assert main(["-q", "evaluate", "--run", str(run), "--test", str(held), *EVAL, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in rows] == ["two-tower", "popularity"]
    for r in rows:
        assert {k: r[k] for k in text} == text
    assert _said(caplog.text) == text  # the warnings are given with --json too, alike
    # --csv: the same counts as columns
    assert main(["-q", "evaluate", "--run", str(run), "--test", str(held), *EVAL, "--csv", "-"]) == 0
    line = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {k: int(line[k]) for k in text} == text


def test_the_runs_own_split_says_none_dropped_and_unmasked_pairs_are_not_counted_as_never_hit(setup, capsys):
    run, held, _ = setup
    assert main(["-q", "evaluate", "--run", str(run), *EVAL, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    n_test = len(pd.read_csv(run / "data" / "test.csv"))
    assert (row["held_out_rows"], row["held_out_rows_dropped"], row["held_out_unknown_users"],
            row["held_out_unknown_items"], row["held_out_pairs"], row["held_out_pairs_excluded_as_seen"]) == (
        n_test, 0, 0, 0, n_test, 0)
    # --no-exclude-seen: a repeat can be hit, so no pair is "never hit" (and no warning says so)
    assert main(["-q", "evaluate", "--run", str(run), "--test", str(held), *EVAL, "--json", "--no-exclude-seen"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["held_out_pairs_excluded_as_seen"] == 0 and row["held_out_rows_dropped"] == 3


def test_pairs_in_the_input_history_are_counted_apart(setup, capsys, caplog):
    run, _, paths = setup
    # --split valid with valid.csv among the inputs: every valid pair is in the input history, none in train
    assert main(["evaluate", "--run", str(run), "--split", "valid", "--history-from", str(paths["train"]),
                 str(paths["valid"]), *EVAL, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    said = re.search(r"(\d+) of (\d+) valid pairs (?:is|are) in the input history", caplog.text)
    assert said, caplog.text
    assert (row["held_out_pairs_in_input_history"], row["held_out_pairs"]) == (int(said[1]), int(said[2]))
    assert row["held_out_pairs_in_input_history"] == len(pd.read_csv(paths["valid"])) > 0
    assert row["held_out_pairs_excluded_as_seen"] == 0  # counted once, not in both


def test_a_segment_row_counts_its_own_pairs(setup, capsys):
    run, held, _ = setup
    assert main(["-q", "evaluate", "--run", str(run), "--test", str(held), *EVAL, "--json", "--segments",
                 "cold-items"]) == 0
    rows = [r for r in json.loads(capsys.readouterr().out) if r["model"] == "two-tower"]
    whole, parts = rows[0], rows[1:]
    assert [r["segment"] for r in rows] == ["all", "cold items", "warm items"]
    assert sum(r["held_out_pairs"] for r in parts) == whole["held_out_pairs"]
    assert sum(r["held_out_pairs_excluded_as_seen"] for r in parts) == whole["held_out_pairs_excluded_as_seen"]
    for r in parts:  # the file's rows and ids are the file's
        assert r["held_out_rows_dropped"] == whole["held_out_rows_dropped"] == 3


def test_a_segment_row_counts_its_own_users_without_input_history(setup, tmp_path, capsys):
    """A segment row's `users_empty_input_history` is of its own users, as `--test` with a file of just its pairs
    gives it (README: the segment's figures equal that): the `cold items` row said the whole file's count, more
    users without a history than the row had users."""
    run, held, paths = setup
    held_out = pd.read_csv(held, dtype=str)
    held_out = held_out[held_out["user_id"] != "nobody"]
    held_out = held_out[held_out["item_id"] != "no-such-item"]
    # the input history lacks the users of the first half of the held-out file: some cold, some warm only
    lacking = set(held_out["user_id"].unique()[:len(held_out["user_id"].unique()) // 2])
    train = pd.read_csv(paths["train"], dtype=str)
    train[~train["user_id"].isin(lacking)].to_csv(tmp_path / "history.csv", index=False)
    history = ["--history-from", str(tmp_path / "history.csv")]
    assert main(["-q", "evaluate", "--run", str(run), "--test", str(held), *EVAL, *history, "--json",
                 "--segments", "cold-items"]) == 0
    rows = {r["segment"]: r for r in json.loads(capsys.readouterr().out) if r["model"] == "two-tower"}
    cold = held_out["item_id"].isin(COLD)
    for segment, pairs in (("cold items", held_out[cold]), ("warm items", held_out[~cold])):
        pairs.to_csv(tmp_path / "pairs.csv", index=False)
        assert main(["-q", "evaluate", "--run", str(run), "--test", str(tmp_path / "pairs.csv"), *EVAL, *history,
                     "--json"]) == 0
        alone = json.loads(capsys.readouterr().out)[0]
        own = len(set(pairs["user_id"]) & lacking)
        assert rows[segment]["users_held_out"] == alone["users_held_out"]
        assert rows[segment]["users_empty_input_history"] == alone["users_empty_input_history"] == own
    assert rows["all"]["users_empty_input_history"] == len(lacking)
    assert rows["cold items"]["users_empty_input_history"] < len(lacking)


def test_held_out_rows_are_the_files_rows_and_its_duplicates_are_counted(setup, tmp_path, capsys, caplog):
    """`held_out_rows` is the file's rows read (README), its repeated rows included: a file of 140 rows, 40 of them
    exact duplicates, said `held_out_rows: 100` and "dropped 1 of 100 rows", and only an INFO line (hidden by -q)
    told of the 40. They are counted apart now, as `data split`'s report counts them, and the figures are those of
    the file without them (a pair counts once)."""
    run, held, _ = setup
    rows = pd.read_csv(held)
    conflicting = rows.iloc[[1]].assign(rating=rows["rating"].iloc[1] + 1)  # its user, item and time, another rating
    repeated = pd.concat([rows, rows.iloc[:5], rows.iloc[[-1]], conflicting], ignore_index=True)
    repeated.to_csv(tmp_path / "repeated.csv", index=False)
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert main(["-q", "evaluate", "--run", str(run), "--test", str(tmp_path / "repeated.csv"), *EVAL,
                     "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert main(["-q", "evaluate", "--run", str(run), "--test", str(held), *EVAL, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    for r, p in zip(got, plain):
        assert (r["held_out_rows"], r["held_out_duplicates_dropped"], r["held_out_conflicting_duplicates_dropped"],
                r["held_out_rows_dropped"]) == (len(repeated), 6, 1, 3)
        assert (p["held_out_duplicates_dropped"], p["held_out_conflicting_duplicates_dropped"]) == (0, 0)
        assert {k: v for k, v in r.items() if "@" in k} == {k: v for k, v in p.items() if "@" in k}
        assert r["held_out_pairs"] == p["held_out_pairs"] and r["users_held_out"] == p["users_held_out"]
    said = re.search(r"dropped (\d+) of (\d+) rows: .*?; (\d+) other rows repeat an earlier row", caplog.text)
    assert said, caplog.text
    assert tuple(map(int, said.groups())) == (3, len(repeated), 7)
    # --csv: the same counts as columns
    assert main(["-q", "evaluate", "--run", str(run), "--test", str(tmp_path / "repeated.csv"), *EVAL, "--csv",
                 "-"]) == 0
    line = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (int(line["held_out_rows"]), int(line["held_out_duplicates_dropped"]),
            int(line["held_out_conflicting_duplicates_dropped"])) == (len(repeated), 6, 1)
