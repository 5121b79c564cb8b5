"""A loss.temperature far outside its useful range is warned of at start-up (loss.temperature=1e-8 trained without
a word to valid NDCG@10 0.010 after one epoch on MovieLens-100K, 0.137 at the default)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from twotower.config import LossConfig, load_config
from twotower.pipeline.run import train_run

FAST = ["train.epochs=1", "train.progress=false", "train.checkpoint=false", "train.threads=1", "train.batch_size=64",
        "model.user.hidden=[8]", "model.item.hidden=[8]", "model.user.out_dim=8", "model.item.out_dim=8",
        "model.item.id_dim=8", "model.user.history_dim=8", "model.user.history_len=4", "eval.baselines=[]",
        "model.item_item.enabled=false"]


def _frames() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    rows = [(f"u{u}", f"i{int(rng.integers(30))}", t) for u in range(30) for t in range(6)]
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).drop_duplicates(["user_id", "item_id"])
    last = df.groupby("user_id")["timestamp"].transform("max")
    return {"train": df[df.timestamp < last].reset_index(drop=True), "valid": df[df.timestamp == last].reset_index(drop=True)}


def test_training_with_a_tiny_temperature_warns_naming_the_setting_and_its_default(tmp_path, caplog):
    cfg = load_config(overrides=[*FAST, "loss.temperature=1e-8"])
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        train_run(cfg, tmp_path / "r", frames=_frames())  # a warning, not a refusal: the run trains
    assert f"loss.temperature=1e-08 is far below its useful range (0.0001 to 0.5; the default is " \
           f"{LossConfig.temperature:g})" in caplog.text


@pytest.mark.parametrize("overrides, warned", [
    (["loss.temperature=1e-5"], "far below"),
    (["loss.temperature=1e-4"], None),  # the ends of the range are in it
    ([], None),
    (["loss.temperature=0.5"], None),
    (["loss.temperature=1"], "far above"),
    (["loss.temperature=10", "loss.kind=bpr"], "far above"),  # every loss divides the scores by it
    # raw inner products can be any size: only a tiny temperature is then suspect
    (["loss.temperature=10", "model.user.normalize=false", "model.item.normalize=false"], None),
    (["loss.temperature=1e-6", "model.user.normalize=false", "model.item.normalize=false"], "far below"),
])
def test_the_warning_bounds(overrides, warned, caplog):
    from twotower.pipeline.run import _warn_far_off_temperature

    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        _warn_far_off_temperature(load_config(overrides=[*FAST, *overrides]))
    if warned is None:
        assert "loss.temperature" not in caplog.text
    else:
        assert f"is {warned} its useful range" in caplog.text and "learn little" in caplog.text
