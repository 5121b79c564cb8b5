"""`twotower evaluate --segments cold-items,new-users`: rows for the held-out pairs of items (users) with no row in the
run's training data and for the others, for every model; each equals evaluating a test file holding those pairs alone.
A walkthrough had to build a cold-only test file by hand to see how a feature-reading item tower does on cold items."""
from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest

from tests.synthetic import write_dataset_with_cold_items
from twotower.cli.main import main

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
        "model.item.out_dim=8", "model.user.history_len=4", "train.threads=1", "--no-progress", "--no-eval"]
EVAL = ["--baselines", "popularity,ease,itemknn", "--ks", "5,10", "--threads", "1"]
COLD = ["i0", "i11", "i12"]  # held-out items whose train and valid rows are removed: in the vocabulary by the item table


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval-segments")
    paths = write_dataset_with_cold_items(d / "data", COLD, n_users=30, n_items=24, per_user=10)
    test = pd.read_csv(paths["test"])
    test[test["item_id"].isin(COLD)].to_csv(d / "cold.csv", index=False)
    test[~test["item_id"].isin(COLD)].to_csv(d / "warm.csv", index=False)
    out = d / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--items", str(paths["items"]), 'data.item_multi=["genres"]', "--out", str(out),
                 "--epochs", "1", *FAST]) == 0
    return out


def _json(capsys, *argv: str) -> list[dict]:
    assert main(["-q", "evaluate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_segment_rows_equal_evaluating_the_hand_filtered_file(run_dir, capsys):
    rows = _json(capsys, "--run", str(run_dir), *EVAL, "--segments", "cold-items")
    plain = _json(capsys, "--run", str(run_dir), *EVAL)
    models = [r["model"] for r in plain]
    assert [(r["model"], r["segment"]) for r in rows] == [
        (m, s) for m in models for s in ("all", "cold items", "warm items")]
    whole = [r for r in rows if r["segment"] == "all"]
    for r, p in zip(whole, plain):  # the rows without --segments are kept, key for key
        timing = ("eval_s", "fit_s")  # seconds: measured anew
        assert set(p) <= set(r) and {k: r[k] for k in p if k not in timing} == {k: v for k, v in p.items() if k not in timing}
    test = pd.read_csv(run_dir / "data" / "test.csv")
    for segment, name in (("cold items", "cold.csv"), ("warm items", "warm.csv")):
        file = run_dir.parent / name
        by_file = _json(capsys, "--run", str(run_dir), *EVAL, "--test", str(file))
        mine = [r for r in rows if r["segment"] == segment]
        held = pd.read_csv(file)
        for r, f in zip(mine, by_file, strict=True):
            assert r["model"] == f["model"]
            assert r["held_out_pairs"] == len(held) and r["users_held_out"] == held["user_id"].nunique()
            for key, value in f.items():
                if "@" in key or key in ("users_evaluated", "users_skipped", "users_held_out"):
                    assert r[key] == pytest.approx(value, rel=1e-9), (segment, r["model"], key)
    assert sum(r["held_out_pairs"] for r in rows[1:3]) == rows[0]["held_out_pairs"] == len(test)
    assert rows[1]["held_out_pairs"] == test["item_id"].isin(COLD).sum() > 0


def test_table_csv_and_record_carry_the_segments(run_dir, capsys, tmp_path):
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "5", "--threads", "1",
                 "--segments", "cold-items", "--csv", str(tmp_path / "e.csv")]) == 0
    out = capsys.readouterr().out
    n_cold = int(pd.read_csv(run_dir.parent / "cold.csv").shape[0])
    assert f"cold items: {n_cold} held-out pairs of {n_cold} users" in out and "warm items: " in out
    lines = list(csv.DictReader(io.StringIO((tmp_path / "e.csv").read_text())))
    assert [(line["model"], line["segment"]) for line in lines] == [
        (m, s) for m in ("two-tower", "popularity") for s in ("all", "cold items", "warm items")]
    assert json.loads((tmp_path / "e.csv.json").read_text())["segments"] == ["cold-items"]


def test_the_plot_line_counts_the_models_drawn(run_dir, capsys, tmp_path):
    """The plot draws the "all" rows alone, one line a model: "wrote Recall@k of 6 models" counted the segment rows
    too, for 2 models drawn (and rows 2 in the plot's record)."""
    png = tmp_path / "p.png"
    assert main(["evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "5,10", "--threads", "1",
                 "--segments", "cold-items", "--plot", str(png)]) == 0  # without -q: the "wrote" line
    assert f"wrote Recall@k of 2 models to {png}" in capsys.readouterr().err
    assert json.loads((tmp_path / "p.png.json").read_text())["output"]["rows"] == 2


def test_empty_segment_adds_no_rows_and_says_so(run_dir, capsys, caplog):
    rows = _json(capsys, "--run", str(run_dir), "--baselines", "popularity", "--ks", "5", "--threads", "1",
                 "--segments", "new-users")  # every test user has training rows
    assert [r["segment"] for r in rows] == ["all", "all"]
    assert "segments new-users: none of the" in caplog.text


@pytest.mark.parametrize("value, message", [("cold", "unknown 'cold'"), ("cold-items,cold-items", "twice")])
def test_bad_segments_refused(run_dir, capsys, value, message):
    assert main(["-q", "evaluate", "--run", str(run_dir), "--segments", value]) == 2
    assert message in capsys.readouterr().err



def test_cold_pairs_dropped_for_a_run_without_an_item_table_are_named(tmp_path, capsys, caplog):
    """A run trained without --items has no row for an item without training rows: its cold test pairs are dropped
    as unknown, and "none of the pairs has a item with no row" read as if the split held no cold items."""
    paths = write_dataset_with_cold_items(tmp_path / "data", COLD, n_users=30, n_items=24, per_user=10)
    out = tmp_path / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--out", str(out), "--epochs", "1", *FAST]) == 0
    capsys.readouterr()  # the training's own output
    rows = _json(capsys, "--run", str(out), "--baselines", "", "--ks", "5", "--threads", "1",
                 "--segments", "cold-items")
    assert [r["segment"] for r in rows] == ["all"]
    said = caplog.text
    assert "segments cold-items: none of the" in said and "pairs has an item with no row" in said
    assert "outside the run's vocabulary, whose pairs were left out (said above), are the ones without training " \
           "rows: train with --items FILE (an item table)" in said


NEW = ["u0", "u1", "u2", "u16", "u17"]  # test users whose train rows are removed: in the vocabulary by the user table


@pytest.fixture(scope="module")
def new_users_run(tmp_path_factory):
    """A run whose test holds users without training rows (in the vocabulary by the user table), as a time split
    has them, trained with its closing evaluation against every baseline."""
    d = tmp_path_factory.mktemp("eval-new-users")
    paths = write_dataset_with_cold_items(d / "data", [], n_users=30, n_items=24, per_user=10)
    train = pd.read_csv(paths["train"])
    train[~train["user_id"].isin(NEW)].to_csv(paths["train"], index=False)
    users = pd.DataFrame({"user_id": [f"u{u}" for u in range(30)], "group": ["a"] * 15 + ["b"] * 15})
    users.to_csv(d / "users.csv", index=False)
    out = d / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--users", str(d / "users.csv"), 'data.user_categorical=["group"]',
                 "--out", str(out), "--epochs", "1", "eval.baselines=[\"popularity\",\"ease\",\"itemknn\"]",
                 "eval.ks=[5]", *[a for a in FAST if a != "--no-eval"]]) == 0
    assert set(NEW) <= set(pd.read_csv(paths["test"], dtype=str)["user_id"])
    return out


def test_users_without_training_rows_are_counted_and_said(new_users_run, capsys, caplog):
    """Users of a time split with no training rows are ranked by EASE and ItemKNN from an empty history: every item
    scores 0, so each gets the catalogue in item-id order, and `--history-from` said how many such users there were
    while the default protocol (train's closing evaluation, `evaluate`, `evaluate_run`) said nothing; `--json`
    carries their count as `users_empty_input_history`, per segment too."""
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.evaluate_run import evaluate_run

    closing = json.loads((new_users_run / "metrics.json").read_text())["test"]
    assert {r["users_empty_input_history"] for r in closing} == {len(NEW)}
    caplog.clear()
    rows = _json(capsys, "--run", str(new_users_run), *EVAL, "--segments", "new-users")
    said = caplog.text
    assert f"{len(NEW)} of 30 evaluated users have no rows in the run's training data" in said
    assert "ease and itemknn score every item 0 for each of them" in said and "item-id order" in said
    by = {(r["model"].split(" ")[0], r["segment"]): r for r in rows}
    for model in ("two-tower", "popularity", "ease", "itemknn"):
        assert by[model, "all"]["users_empty_input_history"] == len(NEW)
        assert by[model, "new users"]["users_empty_input_history"] == len(NEW)
        assert by[model, "known users"]["users_empty_input_history"] == 0
    # the uninformative list the warning names: both baselines rank every new user by item row alone
    assert {k: v for k, v in by["ease", "new users"].items() if "@" in k} == \
        {k: v for k, v in by["itemknn", "new users"].items() if "@" in k}
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.evaluate_run"):
        rows = evaluate_run(TrainedRun.load(new_users_run), baselines=("popularity",), ks=(5,))
    assert rows[0]["users_empty_input_history"] == len(NEW)
    assert f"{len(NEW)} of 30 evaluated users have no rows in the run's training data" in caplog.text
    assert "score every item 0" not in caplog.text  # no history-based baseline in this table


def test_users_outside_a_runs_user_table_are_not_told_to_train_with_one(new_users_run, tmp_path, capsys, caplog):
    """A held-out file's users outside the vocabulary of a run trained WITH a user table were told to "train with
    --users FILE (a user table)", the flag the run was trained with; the table it had lacks them."""
    test = pd.read_csv(new_users_run / "data" / "test.csv", dtype=str)
    known = test[~test["user_id"].isin(NEW)].head(3)
    stranger = known.head(1).assign(user_id="u99")  # in no training row and not in users.csv
    pd.concat([known, stranger]).to_csv(tmp_path / "t.csv", index=False)
    caplog.clear()
    _json(capsys, "--run", str(new_users_run), "--baselines", "", "--ks", "5", "--threads", "1",
          "--test", str(tmp_path / "t.csv"), "--segments", "new-users")
    said = caplog.text
    assert "the 1 user of the test file outside the run's vocabulary" in said
    assert "train with --users FILE" not in said
    assert (f"they are not in the run's user table ({new_users_run.parent / 'users.csv'}) either: add them to it and "
            "train again") in said
