"""data.multi_separator: multi-valued feature columns written with another separator than '|'.

Before: there was no setting; 'red;blue' became one category 'red;blue', without a word.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from twotower.config import DataConfig, load_config
from twotower.pipeline.prepare import prepare
from twotower.pipeline.sources import load_sources

TRAIN = pd.DataFrame({"user_id": ["u1", "u1", "u2"], "item_id": ["a", "b", "a"], "timestamp": [1, 2, 3]})
ITEMS = pd.DataFrame({"item_id": ["a", "b"], "tags": ["red;blue", "blue"]})


def test_multi_valued_columns_split_on_the_configured_separator():
    prep = prepare(load_sources(DataConfig(item_multi=("tags",), multi_separator=";"),
                                frames={"train": TRAIN, "items": ITEMS}))
    assert sorted(prep.item_encoder.to_dict()["multi"]["tags"]["values"]) == ["blue", "red"]


def test_the_service_filters_on_the_run_s_separator(tmp_path):
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.run import train_run
    from twotower.serving.catalog import ItemCatalog

    TRAIN.to_csv(tmp_path / "train.csv", index=False)
    ITEMS.to_csv(tmp_path / "items.csv", index=False)
    overrides = [f"data.train={json.dumps(str(tmp_path / 'train.csv'))}",
                 f"data.items={json.dumps(str(tmp_path / 'items.csv'))}", 'data.item_multi=["tags"]',
                 'data.multi_separator=";"', "train.epochs=1", "train.progress=false", "train.threads=1",
                 "train.checkpoint=false", "eval.baselines=[]"]
    train_run(load_config(overrides=overrides), tmp_path / "run")
    np.random.seed(None)
    catalog = ItemCatalog.from_run(TrainedRun.load(tmp_path / "run"))
    assert catalog.separator == ";"
