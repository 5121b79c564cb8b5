"""`twotower evaluate --json` rows (and the CSV's columns) name the run they score, as `search evaluate --json`
names its data and model: the rows said their split, never which run, so saved files of two runs read alike."""
from __future__ import annotations

import csv
import io
import json
import os

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
        "model.item.out_dim=8", "model.user.history_len=4", "train.threads=1", "--no-progress", "--no-eval"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval-identity")
    paths = write_dataset(d / "data", n_users=30, n_items=24, per_user=10)
    out = d / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--out", str(out), "--epochs", "1", *FAST]) == 0
    return out


def test_json_rows_and_csv_name_the_run(run_dir, capsys):
    base = ["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "5"]
    assert main([*base, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    fingerprint = TrainedRun.load(run_dir).fingerprint()
    assert [r["model"] for r in rows] == ["two-tower", "popularity"]
    for r in rows:  # the keys scripts read are all there, the run's identity beside them
        assert {"model", "split", "NDCG@5", "Recall@5"} <= set(r)
        assert r["run"] == os.path.abspath(run_dir) and r["run_fingerprint"] == fingerprint
    assert main([*base, "--csv", "-"]) == 0  # the --json keys as columns, as --csv's help says
    lines = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [line["run_fingerprint"] for line in lines] == [fingerprint] * 2


def test_test_file_rows_name_the_file(run_dir, capsys):
    """`--test FILE --json` rows said `split: test`, not which file was scored."""
    file = run_dir.parent / "data" / "test.csv"
    base = ["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "5", "--json"]
    assert main([*base, "--test", str(file)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["split"], r["test_file"]) for r in rows] == [("test", os.path.abspath(file))] * 2
    assert main(base) == 0  # the run's own test split: no file named
    assert "test_file" not in json.loads(capsys.readouterr().out)[0]


def test_help_names_the_keys_that_say_what_was_scored(capsys):
    """--help's --json named split, run and run_fingerprint, not test_file, which --test's rows carry (README)."""
    assert main(["evaluate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--json print")
    json_help = text[start:text.index("--csv FILE", start)]
    assert [k for k in ("split", "run", "run_fingerprint", "test_file") if k not in json_help] == []
