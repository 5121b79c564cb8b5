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


def test_reading_a_large_input_logs_rows_read_and_an_eta(tmp_path, caplog, monkeypatch):
    """A 20M-row CSV file (462 MB) was read for 142 s between "reading" and "read" with no line in a redirected log."""
    from tests.data.chunked_reads import read_every_file_in_chunks
    from twotower.config import TrainConfig

    read_every_file_in_chunks(monkeypatch, rows=10)
    monkeypatch.setattr(TrainConfig, "log_every_s", 1e-9)  # a line at every chunk
    path = tmp_path / "in.csv"
    pd.DataFrame({"user_id": [f"u{i % 4}" for i in range(40)], "item_id": [f"i{i}" for i in range(40)],
                  "timestamp": range(40)}).to_csv(path, index=False)
    with caplog.at_level(logging.INFO, logger="twotower"):
        assert main(["data", "split", "--input", str(path), "--out", str(tmp_path / "o")]) == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"reading {path}: ")]
    assert [line.split(",")[0] for line in lines] == [f"reading {path}: {n} / 40 rows" for n in (10, 20, 30, 40)]
    assert all("rows/s, ETA" in line for line in lines)


def test_a_long_sort_and_split_says_it_is_still_running(tmp_path, caplog, monkeypatch):
    """The sort and split of 20M rows took 97-107 s with no line after "data split: sorting 20000000 rows ..."."""
    import time

    import twotower.pipeline.sources as sources
    from twotower.config import TrainConfig

    real = sources._split

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(sources, "_split", slow)
    monkeypatch.setattr(TrainConfig, "log_every_s", 0.02)
    path = tmp_path / "in.csv"
    pd.DataFrame({"user_id": [f"u{i % 4}" for i in range(40)], "item_id": [f"i{i}" for i in range(40)],
                  "timestamp": range(40)}).to_csv(path, index=False)
    with caplog.at_level(logging.INFO, logger="twotower"):
        assert main(["data", "split", "--input", str(path), "--out", str(tmp_path / "o")]) == 0
    lines = [r.getMessage() for r in caplog.records]
    beats = [i for i, line in enumerate(lines) if line.startswith("data split: sorting and splitting: still running")]
    assert beats
    sorting = next(i for i, line in enumerate(lines) if line.startswith("data split: sorting 40 rows"))
    split = next(i for i, line in enumerate(lines) if line.startswith("temporal split:"))
    assert sorting < beats[0] and beats[-1] < split
