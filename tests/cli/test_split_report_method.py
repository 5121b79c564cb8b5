"""split_report.json's "method" is spelled as `data split --method` takes it, so the report's own values make the
same split again (README: "which with method, ratios / n / the cut-offs and seed make the same split again").
It said "leave_last_n_out" and "global_time", which `--method` refuses."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.cli.train_cmd import _leave_last_split


def _times(path) -> tuple[int, int]:
    ts = pd.read_csv(path)["timestamp"]
    lo, hi = int(ts.min()), int(ts.max())
    return lo + (hi - lo) * 6 // 10, lo + (hi - lo) * 8 // 10


@pytest.mark.parametrize("method", ["leave_last", "time"])
def test_the_reports_method_splits_again_through_data_split(tmp_path, method):
    src = write_dataset(tmp_path / "syn")["all"]
    flags = ["--n", "1"] if method == "leave_last" else [f"--valid-start={_times(src)[0]}", f"--test-start={_times(src)[1]}"]
    assert main(["-q", "data", "split", "--input", str(src), "--method", method, *flags, "--out", str(tmp_path / "a")]) == 0
    report = json.loads((tmp_path / "a" / "split_report.json").read_text())
    assert report["method"] == method
    again = (["--n", str(report["n"])] if method == "leave_last"
             else [f"--valid-start={report['valid_start']}", f"--test-start={report['test_start']}"])
    assert main(["-q", "data", "split", "--input", report["input"]["path"], "--method", report["method"], *again,
                 "--out", str(tmp_path / "b")]) == 0
    for name in ("train.csv", "valid.csv", "test.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


@pytest.mark.parametrize("recorded", ["leave_last", "leave_last_n_out"])
def test_train_still_knows_a_leave_last_split_by_either_name(tmp_path, recorded):
    (tmp_path / "split_report.json").write_text(json.dumps({"method": recorded}))
    assert _leave_last_split(str(tmp_path / "train.csv"))
    (tmp_path / "split_report.json").write_text(json.dumps({"method": "temporal"}))
    assert not _leave_last_split(str(tmp_path / "train.csv"))


def test_a_time_split_with_an_empty_train_part_is_named_as_the_user_asked_for_it(tmp_path, capsys):
    src = write_dataset(tmp_path / "syn")["all"]
    assert main(["-q", "data", "split", "--input", str(src), "--method", "time", "--valid-start", "1",
                 "--test-start", "2", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the time split left the train part empty: no row is before --valid-start 1"), err
    assert "global_time" not in err
