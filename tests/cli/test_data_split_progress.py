"""`data split` says what it is doing before each long step: a 10M-row split was silent for a minute between
"read" and "wrote"."""
from __future__ import annotations

import logging

import pandas as pd

from twotower.cli.main import main


def test_each_long_step_of_a_split_is_announced_with_its_rows(tmp_path, caplog, capsys):
    path = tmp_path / "in.csv"
    pd.DataFrame({"user_id": [f"u{i % 4}" for i in range(40)], "item_id": [f"i{i}" for i in range(40)],
                  "timestamp": range(40)}).to_csv(path, index=False)
    with caplog.at_level(logging.INFO, logger="twotower"):
        assert main(["data", "split", "--input", str(path), "--method", "leave_last", "--out", str(tmp_path / "o")]) == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("data split: ")]
    assert lines == [f"data split: reading {path} (0 MB)",
                     "data split: sorting 40 rows by user, time and item, then splitting them (--method leave_last)",
                     f"data split: saving 4 files into {tmp_path / 'o'}",
                     "data split: writing train.csv (32 rows)",
                     "data split: writing valid.csv (4 rows)",
                     "data split: writing test.csv (4 rows)"]
    assert "wrote" in capsys.readouterr().out
