"""`data split` records each file's sha256 and rows, and `train` warns about a split folder whose files differ.

split_report.json held counts but no digest of train/valid/test.csv: a folder whose files were replaced one at a
time (a split killed between its renames) read as one split, and `train` trained on the mix without a word.
"""
from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main


def _split(src, out, seed: int) -> None:
    assert main(["-q", "data", "split", "--input", str(src), "--method", "random", "--seed", str(seed),
                 "--out", str(out)]) == 0


def test_the_split_report_lists_each_files_sha256_and_rows(tmp_path):
    src = write_dataset(tmp_path / "syn")["all"]
    _split(src, tmp_path / "a", 1)
    files = json.loads((tmp_path / "a" / "split_report.json").read_text())["files"]
    assert sorted(files) == ["test.csv", "train.csv", "valid.csv"]
    for name, entry in files.items():
        path = tmp_path / "a" / name
        assert entry == {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "rows": len(pd.read_csv(path))}


class _Stop(Exception):
    pass


def test_train_warns_about_a_split_folder_mixing_two_splits(tmp_path, monkeypatch, caplog):
    src = write_dataset(tmp_path / "syn")["all"]
    _split(src, tmp_path / "a", 1)
    _split(src, tmp_path / "b", 2)
    shutil.copyfile(tmp_path / "b" / "test.csv", tmp_path / "a" / "test.csv")  # as a kill between renames leaves it

    def stop(*args, **kwargs):
        raise _Stop  # the check is made before the data is read: no training needed

    monkeypatch.setattr("twotower.pipeline.run.prepare_data", stop)
    a = tmp_path / "a"
    argv = ["-q", "train", "--train", str(a / "train.csv"), "--valid", str(a / "valid.csv"), "--test",
            str(a / "test.csv"), "--out", str(tmp_path / "run"), "--threads", "1"]
    with caplog.at_level("WARNING"), pytest.raises(_Stop):
        main(argv)
    warned = [r.getMessage() for r in caplog.records if "split_report.json" in r.getMessage()]
    assert len(warned) == 1 and warned[0].startswith(f"{a / 'test.csv'} is not the file"), warned

    caplog.clear()
    _split(src, a, 1)  # whole again
    with caplog.at_level("WARNING"), pytest.raises(_Stop):
        main(argv)
    assert not [r for r in caplog.records if "split_report.json" in r.getMessage()]


def test_a_split_formats_its_files_a_block_of_rows_at_a_time(tmp_path, monkeypatch):
    """`data split` of 20M rows peaked at 7.7 GB where reading and splitting them took 1.7 GB: each file's whole text
    (a string per cell, then the text, then its bytes) was held until every file was written. Now a block of rows at
    a time, with the same bytes and digests."""
    import twotower.utils.csv_text as csv_text

    formatted: list[int] = []
    real = csv_text.frame_to_csv

    def spy(df):
        formatted.append(len(df))
        return real(df)

    monkeypatch.setattr(csv_text, "CSV_BLOCK_ROWS", 7, raising=False)
    monkeypatch.setattr(csv_text, "frame_to_csv", spy)
    src = write_dataset(tmp_path / "syn")["all"]
    _split(src, tmp_path / "a", 1)
    assert formatted and max(formatted) <= 7
    whole = pd.read_csv(src, dtype={"user_id": str, "item_id": str})
    files = json.loads((tmp_path / "a" / "split_report.json").read_text())["files"]
    parts = []
    for name, entry in files.items():
        path = tmp_path / "a" / name
        parts.append(pd.read_csv(path, dtype={"user_id": str, "item_id": str}))
        assert entry == {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "rows": len(parts[-1])}
    assert sum(map(len, parts)) == len(whole)
