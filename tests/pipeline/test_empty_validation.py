"""A validation split with no usable row (every row names an item unseen in training) stops on the loss.

Before: validation over no user gave NaN, no epoch was ever the best, and after training the run ended in
"model.safetensors missing; the run did not finish an epoch" (one user's file: its one validation item was new).
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from tests.synthetic import make_interactions
from twotower.config import load_config
from twotower.pipeline.artifacts import EMPTY_PART_HEADER, TrainedRun
from twotower.pipeline.evaluate_run import run_matrices
from twotower.pipeline.run import train_run

FAST = ["train.epochs=1", "train.progress=false", "train.threads=1", "train.checkpoint=false", "eval.baselines=[]",
        "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8", "model.item.out_dim=8"]


def test_a_validation_split_of_cold_items_only_falls_back_to_the_training_loss(tmp_path, caplog):
    train = pd.DataFrame({"user_id": ["u1"] * 6 + ["u2"] * 6, "item_id": [f"i{j}" for j in range(6)] * 2,
                          "timestamp": list(range(12))})
    valid = pd.DataFrame({"user_id": ["u1"], "item_id": ["never-trained"], "timestamp": [99]})
    with caplog.at_level(logging.WARNING):
        run, result, _ = train_run(load_config(overrides=FAST), tmp_path / "run", frames={"train": train, "valid": valid})
    np.random.seed(None)
    assert (tmp_path / "run" / "model.safetensors").is_file() and result.best_epoch == 1
    assert "validation: none of its 1 row is usable" in caplog.text  # not "1 rows"


def test_a_zero_valid_share_leaves_no_valid_file_and_an_older_header_only_one_reads_as_none(tmp_path):
    """Before: an empty split part was saved as a header-only data/valid.csv, and scoring the run after
    training stopped on "no data rows"; runs saved that way are now read as having no validation part."""
    df = make_interactions(n_users=20, n_items=15, per_user=8)
    settings = [*FAST, "data.ratios=[0.9,0,0.1]", "train.checkpoint=true"]
    train_run(load_config(overrides=settings), tmp_path / "run", frames={"path": df})
    data = tmp_path / "run" / "data"
    assert not (data / "valid.csv").exists() and (data / "test.csv").is_file()
    (data / "valid.csv").write_bytes(EMPTY_PART_HEADER + b"\n")  # as such a run was saved before
    mats = run_matrices(TrainedRun.load(tmp_path / "run"))
    assert mats.valid is None and mats.test is not None and mats.test.nnz > 0
    # and it resumes: the header-only file is the same data as no validation part
    _, result, _ = train_run(load_config(overrides=[*settings, "train.epochs=2"]), tmp_path / "run", resume=True,
                             frames={"path": df})
    np.random.seed(None)
    assert result.epochs_run == 2


def test_a_test_split_of_unknown_ids_only_is_not_scored_into_a_table_of_nan(tmp_path, caplog, capsys):
    """Before: `twotower train` ended with a test table of nan for every model and a metrics.json of NaN (not
    JSON), and `twotower evaluate --test FILE` printed the same, when no test row named a trained user and item."""
    from twotower.cli.main import main
    from twotower.errors import DataError
    from twotower.pipeline.evaluate_run import evaluate_run

    train = pd.DataFrame({"user_id": ["u1"] * 6 + ["u2"] * 6, "item_id": [f"i{j}" for j in range(6)] * 2,
                          "timestamp": list(range(12))})
    files = {"train": train, "valid": pd.DataFrame({"user_id": ["u1"], "item_id": ["i0"], "timestamp": [99]}),
             "test": pd.DataFrame({"user_id": ["u1", "new-user"], "item_id": ["new-item", "i1"], "timestamp": [99] * 2})}
    for name, df in files.items():
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    out = tmp_path / "run"
    args = ["train", *(a for name in files for a in (f"--{name}", str(tmp_path / f"{name}.csv"))), "--out", str(out),
            *(s.replace("eval.baselines=[]", 'eval.baselines=["popularity"]') for s in FAST)]
    with caplog.at_level(logging.WARNING):
        assert main(args) == 0
    np.random.seed(None)
    assert "test: none of its 2 rows is usable" in caplog.text
    assert not (out / "metrics.json").exists() and "nan" not in capsys.readouterr().out
    for test_file in (None, tmp_path / "test.csv"):  # the run's own data/test.csv, or the file handed in
        with pytest.raises(DataError, match="none of its 2 rows \\(2 users\\) names a user and an item") as e:
            evaluate_run(TrainedRun.load(out), test_file=test_file)
        assert str(test_file or out / "data" / "test.csv") in str(e.value)


@pytest.mark.parametrize("part", ["valid", "test"])
def test_a_header_only_split_file_is_refused_saying_to_leave_its_flag_out(tmp_path, capsys, part):
    """`data split --method time` with equal --valid-start and --test-start asks for no valid part and writes a
    header-only valid.csv; `train --valid` of it stopped on "no data rows (only a header); the interactions table is
    empty", not saying that leaving --valid out is how to train without one."""
    from twotower.cli.main import main

    df = make_interactions(n_users=10, n_items=8, per_user=5)
    df.to_csv(tmp_path / "train.csv", index=False)
    df.head(0).to_csv(tmp_path / "empty.csv", index=False)
    assert main(["-q", "train", "--train", str(tmp_path / "train.csv"), f"--{part}", str(tmp_path / "empty.csv"),
                 "--out", str(tmp_path / "run"), *FAST]) != 0
    err = capsys.readouterr().err
    assert f"file {tmp_path / 'empty.csv'}: no data rows (only a header)" in err
    assert f"leave --{part} out to train without" in err
