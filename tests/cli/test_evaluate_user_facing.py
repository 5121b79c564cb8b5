"""`twotower evaluate` as a user reads it: the order of its cut-offs, what it says about the index, its CSV record
and its counts."""

from __future__ import annotations

import json

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main

FAST = [
    "train.batch_size=32",
    "model.user.hidden=[16]",
    "model.item.hidden=[16]",
    "model.user.out_dim=8",
    "model.item.out_dim=8",
    "model.user.history_len=4",
    "train.threads=1",
    "--no-progress",
    "--no-eval",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval-user")
    paths = write_dataset(d / "data", n_users=30, n_items=24, per_user=10)
    out = d / "run"
    assert (
        main(
            [
                "-q",
                "train",
                "--train",
                str(paths["train"]),
                "--valid",
                str(paths["valid"]),
                "--test",
                str(paths["test"]),
                "--out",
                str(out),
                "--epochs",
                "1",
                *FAST,
            ]
        )
        == 0
    )
    return out


def _table_ks(out: str) -> list[int]:
    """The k column of the printed table, in the order printed."""
    return [int(line.split()[1]) for line in out.splitlines() if line.startswith("two-tower ")]


def test_ks_are_reported_in_ascending_order_whatever_order_given(run_dir, tmp_path, capsys):
    """`--ks 20,5,10` printed the table's k=20 rows first and recorded ks [20, 5, 10], while the CSV's columns and
    the JSON keys were ascending."""
    csv = tmp_path / "e.csv"
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "20,5,10", "--csv", str(csv)]) == 0
    assert _table_ks(capsys.readouterr().out) == [5, 10, 20]
    assert json.loads((tmp_path / "e.csv.json").read_text())["ks"] == [5, 10, 20]


def test_the_runs_own_ks_are_reported_ascending_too(tmp_path, capsys):
    paths = write_dataset(tmp_path / "data", n_users=30, n_items=24, per_user=10)
    out = tmp_path / "run"
    assert (
        main(
            [
                "-q",
                "train",
                "--train",
                str(paths["train"]),
                "--valid",
                str(paths["valid"]),
                "--test",
                str(paths["test"]),
                "--out",
                str(out),
                "--epochs",
                "1",
                "eval.ks=10,5",
                *FAST,
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["-q", "evaluate", "--run", str(out), "--baselines", ""]) == 0
    assert _table_ks(capsys.readouterr().out) == [5, 10]


def test_evaluate_says_it_does_not_use_the_runs_index(tmp_path, capsys):
    """With RUN/index built, `recommend` ranks through it, but `evaluate` ranked exactly without a word."""
    paths = write_dataset(tmp_path / "data", n_users=30, n_items=24, per_user=10)
    out = tmp_path / "run"
    train = ["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test", str(paths["test"])]
    assert main([*train, "--out", str(out), "--epochs", "1", *FAST]) == 0
    evaluate = ["evaluate", "--run", str(out), "--baselines", "", "--ks", "5"]  # no -q: it leaves out the line
    capsys.readouterr()
    assert main(evaluate) == 0
    assert "not used" not in capsys.readouterr().err  # no index: nothing to say
    assert main(["-q", "index", "build", "--run", str(out), "--index", "flat", "--threads", "1"]) == 0
    capsys.readouterr()
    assert main(evaluate) == 0
    assert (
        f"evaluation ranks exactly over the full catalogue; the index in {out / 'index'} is not used" in capsys.readouterr().err
    )


def test_evaluate_names_a_stale_index_as_stale_not_as_the_place_of_its_recall(tmp_path, capsys):
    """An index built before a `--resume` is refused by `recommend` and `serve` (another model fingerprint), but
    `evaluate` pointed to its tune.json for "its recall against exact search", a recall of the old weights."""
    paths = write_dataset(tmp_path / "data", n_users=30, n_items=24, per_user=10)
    out = tmp_path / "run"
    train = ["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test", str(paths["test"]),
             "--out", str(out), *FAST]
    assert main([*train, "--epochs", "1"]) == 0
    assert main(["-q", "index", "build", "--run", str(out), "--index", "flat", "--threads", "1"]) == 0
    built_for = json.loads((out / "index" / "meta.json").read_text())["model_fingerprint"]
    assert main([*train, "--epochs", "2", "--resume"]) == 0
    capsys.readouterr()
    assert main(["-q", "evaluate", "--run", str(out), "--baselines", "", "--ks", "5"]) == 0
    err = capsys.readouterr().err
    assert f"the index in {out / 'index'} is not used, and it is stale: built for model {built_for}" in err
    assert f"`twotower index build --run {out} --index flat`" in err  # the type it was built as
    assert "tune.json" not in err


def test_the_csv_record_names_the_tuned_baselines_file_only_when_a_row_came_from_it(run_dir, tmp_path):
    """`--baselines popularity --csv` recorded RUN/tuned_baselines.json (left by an earlier evaluation) as the
    file the λ and k came from, though no row was tuned."""
    csv = tmp_path / "e.csv"
    base = ["-q", "evaluate", "--run", str(run_dir), "--ks", "5", "--csv", str(csv)]
    assert main([*base, "--baselines", "itemknn"]) == 0
    tuned = json.loads((tmp_path / "e.csv.json").read_text())["tuned_baselines"]
    assert tuned["path"] == str((run_dir / "tuned_baselines.json").resolve()) and tuned["sha256"]
    assert main([*base, "--baselines", "popularity"]) == 0
    assert (run_dir / "tuned_baselines.json").is_file()
    assert json.loads((tmp_path / "e.csv.json").read_text())["tuned_baselines"] is None


def test_counts_of_one_take_the_singular(run_dir, tmp_path, capsys, caplog):
    """`--baselines ''` printed "wrote 1 rows" and "of 1 models"; a one-row --test file of an unknown user said
    "1 users never seen in training" (now: outside the run's vocabularies) and "none of its 1 rows (1 users)"."""
    csv, png = tmp_path / "e.csv", tmp_path / "e.png"
    assert (
        main(["evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5", "--csv", str(csv), "--plot", str(png)])
        == 0
    )
    err = capsys.readouterr().err
    assert f"wrote 1 row to {csv}" in err and f"wrote Recall@k of 1 model to {png}" in err
    one = tmp_path / "one.csv"
    one.write_text("user_id,item_id,timestamp,rating\nnobody,i1,1,5\n")
    assert main(["evaluate", "--run", str(run_dir), "--test", str(one), "--baselines", ""]) == 2
    assert "none of its 1 row (1 user) names a user and an item" in capsys.readouterr().err
    assert "dropped 1 of 1 rows: 1 user outside the run's vocabularies" in caplog.text


def test_the_users_line_counts_one_user_in_the_singular():
    from twotower.cli.evaluate_cmd import users_line

    assert users_line([{"users_held_out": 1, "users_evaluated": 1}]) == "users: the 1 held-out user evaluated"
    assert users_line([{"users_held_out": 2, "users_evaluated": 1}]).startswith(
        "users: 1 of 2 held-out users evaluated; the other 1 is skipped, not counted as misses"
    )
    assert users_line([{"users_held_out": 5, "users_evaluated": 2}]).startswith(
        "users: 2 of 5 held-out users evaluated; the other 3 are skipped"
    )
