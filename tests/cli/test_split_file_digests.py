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
