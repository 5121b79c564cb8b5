"""A run's config.json reproduces the run: `train --config RUN/config.json` from any working directory."""
from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from tests.pipeline.test_run_inputs import FAST
from tests.synthetic import make_interactions, make_items
from twotower.cli.main import main
from twotower.utils.version import installed_version


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


#: Settings an earlier version's run lacks in its config.json, at the values that version trained with
_OLDER_VERSION = {"model.user.extra_pools": "[]", "model.item_item.enabled": "false", "train.history_dropout": "0",
                  "train.ema_decay": "null", "model.user.dropout_rng": "torch", "model.item.dropout_rng": "torch"}


def test_an_older_versions_run_trains_again_from_its_config_as_it_did(tmp_path, monkeypatch, caplog):
    """`train --config OLD_RUN/config.json` read the settings an older run's file lacks at today's defaults: the
    replay trained a second history pool, history dropout and the item-item term (312,976 parameters where the run
    had 296,592) without a word, though --resume, serve and recommend read the same file as the run was trained. A
    run's own config.json (beside its run.json) now reads as they read it, and the log names what it read so."""
    data = tmp_path / "data"
    data.mkdir()
    make_interactions(n_users=16, n_items=12, per_user=6).to_csv(data / "all.csv", index=False)
    monkeypatch.chdir(data)
    assert main(["-q", "train", "--data", "all.csv", "--out", str(tmp_path / "a"), "--epochs", "1", "--threads", "1",
                 "--no-eval", "data.split=random", *FAST, *(f"{k}={v}" for k, v in _OLDER_VERSION.items())]) == 0
    saved = json.loads((tmp_path / "a" / "config.json").read_text())
    model, train = saved["model"], saved["train"]  # as the version before these settings saved it
    del model["item_item"], model["user"]["extra_pools"], train["history_dropout"], train["ema_decay"]
    for tower in ("user", "item"):
        del model[tower]["dropout_rng"]
    (tmp_path / "a" / "config.json").write_text(json.dumps(saved))
    with caplog.at_level("INFO", logger="twotower"):
        assert main(["-q", "train", "--config", str(tmp_path / "a" / "config.json"), "--out", str(tmp_path / "b")]) == 0
    a, b = (load_file(tmp_path / d / "model.safetensors") for d in ("a", "b"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert (f"config file {tmp_path / 'a' / 'config.json'} is the record of a run saved by an earlier version, read "
            "as that run was trained: ") in caplog.text
    assert "model.user.extra_pools=[]" in caplog.text and "train.history_dropout=0.0" in caplog.text


def test_a_config_file_written_by_hand_takes_todays_defaults(tmp_path) -> None:
    """Only a run's own config.json is a record of how a run trained: the same settings in a file the user wrote
    (no run beside it) leave what they lack to today's defaults."""
    from twotower.config import RunConfig, config_to_dict, load_config

    saved = config_to_dict(RunConfig())
    del saved["model"]["item_item"], saved["model"]["user"]["extra_pools"], saved["train"]["history_dropout"]
    mine = tmp_path / "config.json"
    mine.write_text(json.dumps(saved))
    cfg = load_config(mine)
    assert (cfg.model.user.extra_pools, cfg.train.history_dropout, cfg.model.item_item.enabled) == ((1.0,), 0.2, True)
    (tmp_path / "run.json").write_text("{}")  # beside a run's record, it is one
    cfg = load_config(mine)
    assert (cfg.model.user.extra_pools, cfg.train.history_dropout, cfg.model.item_item.enabled) == ((), 0.0, False)


def test_a_runs_setting_this_version_does_not_know_says_the_run_may_be_newer(tmp_path) -> None:
    """A run saved by a newer twotower holds settings this one does not know: `recommend`, `serve` and `--resume`
    said "error: unknown setting 'train.future_knob'; valid keys: ..." without naming the file, and `--config` named
    it as a typo of the user's, though nobody typed it; both now say the run may be from a newer twotower."""
    from twotower.config import ConfigError, RunConfig, config_to_dict, load_config
    from twotower.pipeline.artifacts import saved_run_config

    saved = config_to_dict(RunConfig())
    saved["train"]["future_knob"] = 1
    path = tmp_path / "config.json"
    path.write_text(json.dumps(saved))
    (tmp_path / "run.json").write_text("{}")
    for read in (saved_run_config, load_config):
        with pytest.raises(ConfigError) as e:
            read(path)
        assert f"{path}: unknown setting 'train.future_knob'" in str(e.value)
        assert str(e.value).endswith("; the run may have been saved by a newer twotower than this one (version "
                                     f"{installed_version()}): upgrade twotower to read it")
