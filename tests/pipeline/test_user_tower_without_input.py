"""A user tower that reads nothing (no history, no ID, no user features) is a one-line refusal, not a traceback."""
from __future__ import annotations

import subprocess
import sys

import pytest

import twotower.pipeline.run as run_mod
from tests.synthetic import make_interactions
from twotower.config import load_config
from twotower.errors import ConfigError

NO_INPUT = r"^the user tower has no input: model\.user\.history=none reads no history; set model\.user\.history=recency"


def test_no_user_input_is_refused_before_training(tmp_path) -> None:
    # it was "ValueError: user tower has no input: enable use_id, features or history" from the tower's
    # constructor, a traceback out of `twotower train`, where --print-config had passed the same settings
    cfg = load_config(overrides=["train.epochs=1", "train.progress=false", "train.threads=1", "eval.baselines=[]",
                                 "model.user.history=none"])
    with pytest.raises(ConfigError, match=NO_INPUT):
        run_mod.train_run(cfg, tmp_path / "run", frames={"path": make_interactions(n_users=20, n_items=15,
                                                                                   per_user=8)})
    assert not (tmp_path / "run").exists()


def test_the_cli_says_it_in_one_error_line(tmp_path) -> None:
    data = tmp_path / "d.csv"
    make_interactions(n_users=20, n_items=15, per_user=8).to_csv(data, index=False)
    out = subprocess.run([sys.executable, "-m", "twotower", "train", "--data", str(data), "--out", str(tmp_path / "r"),
                          "model.user.history=none", "train.epochs=1", "-q"], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("error: the user tower has no input: "), out.stderr


def test_an_id_or_a_history_is_input_enough() -> None:
    from twotower.config import TowerConfig
    from twotower.models.towers import check_user_inputs

    check_user_inputs(TowerConfig(history="none", use_id=True), 0)
    check_user_inputs(TowerConfig(history="mean"), 0)
    check_user_inputs(TowerConfig(history="none"), 3)  # user features
