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
