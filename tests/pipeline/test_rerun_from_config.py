"""A run's config.json reproduces the run: `train --config RUN/config.json` from any working directory."""
from __future__ import annotations

import json

import numpy as np
from safetensors.numpy import load_file

from tests.pipeline.test_run_inputs import FAST
from tests.synthetic import make_interactions, make_items
from twotower.cli.main import main


def test_training_again_from_the_written_config_elsewhere_gives_the_same_weights(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    make_interactions(n_users=16, n_items=12, per_user=6).to_csv(data / "all.csv", index=False)
    make_items(12).to_csv(data / "items.csv", index=False)
    monkeypatch.chdir(data)  # the inputs given relative to the working directory, as a user types them
    assert main(["-q", "train", "--data", "all.csv", "--items", "items.csv", "--out", str(tmp_path / "a"),
                 "--epochs", "1", "--threads", "1", "--no-eval", "data.split=random", *FAST]) == 0
    saved = json.loads((tmp_path / "a" / "config.json").read_text())["data"]
    assert saved["path"] == str(data / "all.csv") and saved["items"] == str(data / "items.csv")
    monkeypatch.chdir(tmp_path)  # elsewhere: "error: file all.csv: file not found" when the paths were kept as typed
    assert main(["-q", "train", "--config", str(tmp_path / "a" / "config.json"), "--out", str(tmp_path / "b")]) == 0
    a, b = (load_file(tmp_path / d / "model.safetensors") for d in ("a", "b"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
