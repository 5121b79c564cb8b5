"""`train --resume` of a run saved by an earlier version, whose config.json lacks settings added since.

Evidence: a MovieLens-100K run of an earlier commit was refused with "the model settings differ from the run's
(model.item.dropout_rng: None in the run, 'pcg64' now; model.item.extra_pools: None in the run, [] now; ...)",
though the resume set no model setting: the run's missing settings were compared as None.
"""
from __future__ import annotations

import functools
import json
import operator

import pytest

from tests.explain.explain_tiny_run import train_tiny_run
from twotower.config import ConfigError, RunConfig, config_to_dict, load_config
from twotower.pipeline.artifacts import TrainedRun, write_manifest
from twotower.pipeline.run import train_run


def _older_run(tmp_path):
    # PyTorch's dropout masks, as runs saved before model.*.dropout_rng drew them
    out = train_tiny_run(tmp_path / "run", extra=("train.checkpoint=true", "model.item_item.enabled=false",
                                                  "model.user.dropout_rng=torch", "model.item.dropout_rng=torch"))
    settings = json.loads((out / "config.json").read_text())
    saved = json.loads(json.dumps(settings))
    for tower in ("user", "item"):  # settings added since, at the values the run was trained with
        del saved["model"][tower]["dropout_rng"]
    (out / "config.json").write_text(json.dumps(saved))
    write_manifest(out)
    return out, settings


def test_settings_an_older_run_lacks_are_not_read_as_changed(tmp_path) -> None:
    out, settings = _older_run(tmp_path)
    cfg = load_config(base=settings, overrides=["train.epochs=3"])
    assert isinstance(cfg, RunConfig)
    train_run(cfg, out, resume=True)
    TrainedRun.load(out)  # sealed again: the manifest verifies every file
    assert [r["epoch"] for r in json.loads((out / "checkpoint" / "state.json").read_text())["history"]] == [1, 2, 3]


def test_an_older_run_resumes_with_todays_dropout_masks_and_says_so(tmp_path, caplog) -> None:
    """The dropout masks' source draws random numbers and builds no weight: an older run (PyTorch's masks) resumed
    with today's settings goes on with pcg64's masks, named as a training setting is, rather than refused."""
    out, settings = _older_run(tmp_path)
    with caplog.at_level("INFO", logger="twotower.pipeline.run"):
        train_run(load_config(base=settings, overrides=["train.epochs=3", "model.user.dropout_rng=pcg64",
                                                        "model.item.dropout_rng=pcg64"]), out, resume=True)
    assert "model.user.dropout_rng: 'torch' in the run, 'pcg64' now" in caplog.text


def test_a_setting_changed_against_an_older_runs_default_is_still_named(tmp_path) -> None:
    out, settings = _older_run(tmp_path)
    cfg = load_config(base=settings, overrides=["model.user.history=recency"])
    assert isinstance(cfg, RunConfig)
    with pytest.raises(ConfigError) as e:
        train_run(cfg, out, resume=True)
    assert "model.user.history: 'mean' in the run, 'recency' now" in str(e.value)
    assert "dropout_rng" not in str(e.value)


def test_the_refusal_names_the_overrides_that_give_the_runs_settings_back(tmp_path) -> None:
    """An older run trained with one history pool was refused on resume, naming the difference; the user then
    had to work out that `model.user.extra_pools=[]` restores it. The error now says what to add (here: a run
    trained with the mean pool and the default second pool, resumed with other values for both)."""
    out, settings = _older_run(tmp_path)
    cfg = load_config(base=settings, overrides=["model.user.history=recency", "model.user.extra_pools=[0.5]"])
    with pytest.raises(ConfigError) as e:
        train_run(cfg, out, resume=True)
    assert ("add model.user.extra_pools=[1.0] model.user.history=mean to resume with the run's settings, or train "
            "into another folder without --resume") in str(e.value)
    again = load_config(base=settings, overrides=["model.user.history=recency", "model.user.extra_pools=[0.5]",
                                                   "model.user.extra_pools=[1.0]", "model.user.history=mean"])
    train_run(again, out, resume=True)  # what the error said to add is what resumes


#: Settings added since runs were first saved whose default trains otherwise than those runs did, at the value the
#: runs saved before each one trained with: what a config.json that lacks the key reads as
_AS_BEFORE_THEY_CAME = {"train.history_dropout": 0.0, "train.ema_decay": None, "train.budget_schedule": False,
                        "model.user.dropout_rng": "torch", "model.item.dropout_rng": "torch",
                        "model.user.extra_pools": [],
                        "eval.ease_solver": "dense", "eval.ease_tune_max_users": None}


def test_a_run_saved_before_a_setting_reads_as_its_version_trained(tmp_path) -> None:
    """train.history_dropout (default 0.2) came after runs that trained without it; their config.json, lacking it,
    read as 0.2, so `--resume` trained on with history dropout and the log said the run itself had it. So with the
    other settings whose default changed what such a run did: the weight average, PyTorch's dropout masks, the
    budget-aimed schedule, and the EASE baseline's solver and tuning sample."""
    from twotower.pipeline.artifacts import saved_run_config

    saved = config_to_dict(RunConfig())
    for key in _AS_BEFORE_THEY_CAME:
        *section, name = key.split(".")
        del functools.reduce(operator.getitem, section, saved)[name]
    (tmp_path / "config.json").write_text(json.dumps(saved))
    read = config_to_dict(saved_run_config(tmp_path / "config.json"))
    assert {key: functools.reduce(operator.getitem, key.split("."), read) for key in _AS_BEFORE_THEY_CAME} == \
        _AS_BEFORE_THEY_CAME
    del saved["model"]["item_item"]  # the term fitted after training came later
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert saved_run_config(tmp_path / "config.json").model.item_item.enabled is False


def test_resuming_a_run_saved_before_history_dropout_goes_on_without_it(tmp_path, caplog) -> None:
    """The walkthrough's `train --out OLD_RUN --resume --epochs 3` trained epoch 3 with history dropout 0.2, named
    only train.epochs as changed, and rewrote config.json to say the whole run had it."""
    from twotower.cli.main import main

    out = train_tiny_run(tmp_path / "run", extra=("train.checkpoint=true", "model.item_item.enabled=false",
                                                  "train.history_dropout=0"))
    saved = json.loads((out / "config.json").read_text())
    del saved["train"]["history_dropout"]  # as the version before the setting saved it
    (out / "config.json").write_text(json.dumps(saved))
    write_manifest(out)
    with caplog.at_level("INFO", logger="twotower.pipeline.run"):
        assert main(["-q", "train", "--out", str(out), "--resume", "--epochs", "3", "train.threads=1"]) == 0
    assert "train.epochs: 2 in the run, 3 now" in caplog.text
    assert "history_dropout" not in caplog.text
    assert json.loads((out / "config.json").read_text())["train"]["history_dropout"] == 0.0


def test_a_run_saved_with_an_item_item_weight_refused_since_still_loads(tmp_path) -> None:
    """model.item_item.weights past MAX_ITEM_ITEM_WEIGHT is refused since, and runs that tried such a weight (it
    trained where it stayed within float32) still load: the weight reads as the bound, where the term alone orders
    the lists as it did at theirs; the weight chosen is in the run's model weights, not in this grid."""
    from twotower.config import MAX_ITEM_ITEM_WEIGHT
    from twotower.pipeline.artifacts import saved_run_config

    saved = config_to_dict(RunConfig())
    saved["model"]["item_item"]["weights"] = [0.0, 0.5, 1e7]
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert saved_run_config(tmp_path / "config.json").model.item_item.weights == (0.0, 0.5, MAX_ITEM_ITEM_WEIGHT)
