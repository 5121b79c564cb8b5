"""A categorical or multi-valued value that only entities without training interactions hold reads as unknown.

It had a code of its own, so its embedding kept its random initialisation (no training example reads it) and
placed every cold item holding it at random: on a synthetic 100K-item table 55,971 of 94,895 brands were such.
"""
from __future__ import annotations

import logging

import pandas as pd

from twotower.config import DataConfig
from twotower.pipeline.prepare import prepare
from twotower.pipeline.sources import load_sources


def _prepare(caplog=None):
    train = pd.DataFrame({"user_id": ["u1", "u1", "u2", "u3"], "item_id": ["1", "2", "2", "3"],
                          "timestamp": [1, 2, 3, 4]})
    items = pd.DataFrame({"item_id": ["1", "2", "3", "4", "5"],
                          "brand": ["acme", "bolt", "acme", "zeta", "bolt"],  # zeta: only item 4, never interacted
                          "tags": ["a|b", "b", "a", "c|a", ""],
                          "price": [1.0, 2.0, 3.0, 10.0, None]})
    users = pd.DataFrame({"user_id": ["u1", "u2", "u3", "u9"], "city": ["x", "y", "x", "w"]})  # u9: no interaction
    cfg = DataConfig(item_categorical=("brand",), item_multi=("tags",), item_numeric=("price",),
                     user_categorical=("city",))
    return prepare(load_sources(cfg, frames={"train": train, "items": items, "users": users}))


def test_a_value_only_cold_items_hold_encodes_as_unknown(caplog):
    with caplog.at_level(logging.INFO, logger="twotower.data.features"):
        prep = _prepare()
    row = {i: prep.item_vocab.index(i) for i in ("1", "2", "3", "4", "5")}
    assert prep.item_encoder.categories["brand"] == ["acme", "bolt"]
    assert prep.item_features.categorical_sizes == (3,)
    cat = prep.item_features.categorical[:, 0]
    assert cat[row["4"]] == 0  # zeta: unknown, the zero vector, not an untrained embedding
    assert cat[row["5"]] == prep.item_encoder.categories["brand"].index("bolt") + 1  # a trained value stays coded
    assert prep.item_encoder.multi_values["tags"] == ["a", "b"]
    assert prep.item_features.multi[0][row["4"]].tolist() == [1, 0]  # c dropped, a kept
    # numeric standardisation is still fitted on every row of the table (docs/config.md)
    assert prep.item_encoder.numeric_stats["price"][0] == 4.0
    assert prep.user_encoder.categories["city"] == ["x", "y"]
    assert prep.user_features.categorical[prep.user_vocab.index("u9"), 0] == 0
    assert ("item features: 1 of the 3 values of column 'brand' (data.item_categorical) occur only on items without "
            "training interactions (e.g. 'zeta')") in caplog.text


def test_users_without_training_rows_get_a_zero_id_row_and_the_same_list_for_the_same_features(tmp_path):
    """A user tower with an ID embedding (model.user.use_id=true) over a user table listing users without training
    rows (a time split's new users): their ID rows kept their random start, which no example reads, so two new users
    with the same features got different lists (3 such pairs of MovieLens-100K's time split: 3 differed)."""
    from twotower.config import load_config
    from twotower.pipeline.recommend import recommend
    from twotower.pipeline.run import train_run
    from tests.synthetic import make_interactions

    train = make_interactions(n_users=20, n_items=12, per_user=6)
    users = pd.DataFrame({"user_id": [f"u{u}" for u in range(20)] + ["new1", "new2"],
                          "group": ["a"] * 10 + ["b"] * 10 + ["a", "a"]})
    overrides = ["model.user.use_id=true", 'data.user_categorical=["group"]', "train.epochs=2", "train.threads=1",
                 "train.progress=false", "train.checkpoint=false", "eval.baselines=[]", "model.user.hidden=[16]",
                 "model.item.hidden=[16]", "model.user.out_dim=8", "model.item.out_dim=8"]
    run, _, _ = train_run(load_config(overrides=overrides), tmp_path / "run", frames={"train": train, "users": users})
    rows = [run.user_row("new1"), run.user_row("new2")]
    assert not run.model.user_tower.id_emb.weight[rows].detach().any()
    first, second = recommend(run, ["new1", "new2"], k=5, exact=True)
    assert [i["item_id"] for i in first] == [i["item_id"] for i in second]
    assert [i["score"] for i in first] == [i["score"] for i in second]
    from twotower.explain.explainer import explain_by_id

    text = explain_by_id(run, user_id="new1", item_id=first[0]["item_id"])["text"]
    assert "rests only on your profile" in text and "user-ID" not in text  # a zero row is not a learned one
