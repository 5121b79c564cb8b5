"""Item-table columns named like the keys answers give an item (score, rank, age, ...) are shown renamed.

A shop's table with a `score` (a rating) or `rank` (a sales rank) column had them overwritten by the
recommendation's own score and rank in every answer, and explain's history `age` (recency) next to an
`age` column of the table read as the same thing; nothing said so.
"""
from __future__ import annotations

import json

import pandas as pd
import pytest


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from tests.explain.explain_tiny_run import write_tiny_data
    from twotower.config import load_config
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.run import train_run

    d = tmp_path_factory.mktemp("reserved")
    write_tiny_data(d / "data")
    items = pd.read_csv(d / "data" / "items.csv")
    items["score"] = 1.5
    items["rank"] = [f"r{i}" for i in range(len(items))]
    items["age"] = 1917
    items["warnings"] = "w"  # GET /items answers its own warnings list (a text broke its schema)
    items["timestamp"] = 5  # GET /users' history entries give when the user had the item
    items.to_csv(d / "data" / "items.csv", index=False)
    q = lambda p: json.dumps(str(p))  # noqa: E731
    train_run(load_config(overrides=[
        f"data.train={q(d / 'data' / 'train.csv')}", f"data.valid={q(d / 'data' / 'valid.csv')}",
        f"data.items={q(d / 'data' / 'items.csv')}", 'data.item_numeric=["year", "age"]', "data.title_col=title",
        "model.user.hidden=16", "model.item.hidden=16", "model.user.out_dim=8", "model.item.out_dim=8",
        "model.user.history_dim=8", "model.item.id_dim=8", "train.epochs=1", "train.batch_size=32",
        "train.progress=false", "train.checkpoint=false", "train.threads=1", "eval.ks=10", "eval.baselines=",
    ]), d / "run")
    return TrainedRun.load(d / "run")


def test_answers_keep_their_own_keys_and_show_the_columns_renamed(run):
    from twotower.serving import RecommenderService
    from twotower.serving.service import RecRequest

    service = RecommenderService.load(run.dir)
    answer = service.recommend(RecRequest(user_id="u1", k=5))
    for rank, item in enumerate(answer["items"], start=1):
        assert item["rank"] == rank and item["score"] != 1.5  # the recommendation's, not the table's
        assert item["item_score"] == 1.5 and item["item_rank"].startswith("r") and item["item_age"] == 1917
    assert service.item("i3")["item_rank"] == "r3"
    record = service.item("i3")
    assert record["item_warnings"] == "w" and record["item_timestamp"] == 5 and record.get("warnings") != "w"
    entry = service.user("u1")["history"][0]
    assert entry["item_timestamp"] == 5 and entry["timestamp"] != 5  # when it was had, and the table's column
    # the feature named age still reads the table's age column (features are not renamed)
    assert "age" in run.config.data.item_numeric


def test_explain_history_age_is_the_recency_and_the_columns_age_is_renamed(run):
    from twotower.explain import explain_by_id

    e = explain_by_id(run, user_id="u1", item_id="i2")
    entry = e["history"][0]
    assert isinstance(entry["age"], int) and entry["age"] < 20 and entry["item_age"] == 1917


def test_training_says_so(tmp_path, caplog):
    from twotower.data.vocab import Vocabulary
    from twotower.pipeline.prepare import _item_meta
    from twotower.pipeline.sources import Sources

    src = Sources.__new__(Sources)
    object.__setattr__(src, "items", pd.DataFrame({"item_id": ["a"], "score": [1], "item_score": [2]}))
    with caplog.at_level("WARNING"):
        meta = _item_meta(src, Vocabulary(["a"]))
    assert list(meta.columns) == ["item_id", "item_item_score", "item_score"]
    assert "'score' would be overwritten in answers by their own key; the run shows it as 'item_item_score'" \
        in caplog.text
