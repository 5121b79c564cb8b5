"""`train --resume` of a run saved by an earlier version, whose config.json lacks settings added since.

Evidence: a MovieLens-100K run of an earlier commit was refused with "the model settings differ from the run's
(model.item.dropout_rng: None in the run, 'pcg64' now; model.item.extra_pools: None in the run, [] now; ...)",
though the resume set no model setting: the run's missing settings were compared as None.
"""
from __future__ import annotations

import json

import pytest

from tests.explain.explain_tiny_run import train_tiny_run
from twotower.config import ConfigError, RunConfig, load_config
from twotower.pipeline.artifacts import TrainedRun, write_manifest
from twotower.pipeline.run import train_run


def _older_run(tmp_path):
    out = train_tiny_run(tmp_path / "run", extra=("train.checkpoint=true", "model.item_item.enabled=false"))
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
