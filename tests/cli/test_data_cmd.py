from __future__ import annotations

import pandas as pd

from tests.synthetic import write_dataset
from twotower.cli.main import main


def test_data_split_writes_three_files_without_overlap(tmp_path, capsys):
    paths = write_dataset(tmp_path / "src")
    out = tmp_path / "split"
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--method", "temporal", "--out", str(out)]) == 0
    parts = {n: pd.read_csv(out / f"{n}.csv", dtype={"user_id": str, "item_id": str}) for n in ("train", "valid", "test")}
    total = sum(len(p) for p in parts.values())
    assert total == len(pd.read_csv(paths["all"]))
    # temporal: every user's test interactions come after their training ones
    for u, g in parts["test"].groupby("user_id"):
        assert g["timestamp"].min() >= parts["train"].loc[parts["train"]["user_id"] == u, "timestamp"].max()
    assert (out / "split_report.json").exists()


def test_data_split_rejects_bad_ratios(tmp_path, capsys):
    paths = write_dataset(tmp_path / "src")
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--ratios", "0.5,0.5,0.5", "--out", str(tmp_path / "o")]) == 2
    assert "ratios" in capsys.readouterr().err


def test_data_split_names_the_flag_and_checks_it_before_reading(tmp_path, capsys):
    # the input does not exist: the bad --n is reported first, by the flag the user typed
    assert main(["-q", "data", "split", "--input", str(tmp_path / "missing.csv"), "--method", "leave_last",
                 "--n", "0", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--n: must be >= 1" in err and "data.leave_n" not in err


def test_data_split_sasrec_leave_last(tmp_path):
    # SASRec format: no header, file order is time order (item ids deliberately out of order)
    src = tmp_path / "seq.txt"
    src.write_text("1 5\n1 3\n1 9\n1 1\n2 2\n2 8\n2 4\n", encoding="utf-8")
    out = tmp_path / "split"
    assert main(["-q", "data", "split", "--input", str(src), "--method", "leave_last", "--n", "1", "--out", str(out)]) == 0
    parts = {n: pd.read_csv(out / f"{n}.csv", dtype={"user_id": str, "item_id": str}) for n in ("train", "valid", "test")}
    assert parts["train"]["item_id"].tolist() == ["5", "3", "2"]
    assert parts["valid"]["item_id"].tolist() == ["9", "8"]
    assert parts["test"]["item_id"].tolist() == ["1", "4"]
    # the written timestamps keep the order when the CSVs are read back
    assert parts["train"]["timestamp"].tolist() == [0, 1, 0]
    assert parts["test"]["timestamp"].tolist() == [3, 2]
