"""A feature table keyed by a column named otherwise than the interactions' id column (data.item_key / user_key).

Before: interactions with ``product`` and an item table keyed by ``sku`` could not be read at all, and the
error told the user to set data.item_col, which would have broken the interactions file instead.
"""
from __future__ import annotations

import pandas as pd
import pytest

from twotower.config import DataConfig
from twotower.errors import ConfigError, DataError
from twotower.pipeline.sources import load_sources

TRAIN = pd.DataFrame({"customer": ["u1", "u1", "u2"], "product": ["a", "b", "a"], "timestamp": [1, 2, 3]})
ITEMS = pd.DataFrame({"sku": ["a", "b", "c"], "brand": ["x", "y", "x"]})
USERS = pd.DataFrame({"cust": ["u1", "u2"], "country": ["FR", "DE"]})


def _cfg(**kw) -> DataConfig:
    return DataConfig(user_col="customer", item_col="product", item_categorical=("brand",), **kw)


def test_item_and_user_tables_with_their_own_key_names_are_read():
    src = load_sources(_cfg(item_key="sku", user_key="cust", user_categorical=("country",)),
                       frames={"train": TRAIN, "items": ITEMS, "users": USERS})
    assert list(src.items["item_id"]) == ["a", "b", "c"] and src.item_spec.key == "item_id"
    assert list(src.users["user_id"]) == ["u1", "u2"] and src.user_spec.key == "user_id"


def test_a_missing_key_column_points_at_the_key_setting():
    with pytest.raises(DataError, match=r"'product' \(the item key column\) not found.*Set data.item_key=NAME"):
        load_sources(_cfg(), frames={"train": TRAIN, "items": ITEMS})


def test_a_key_setting_without_its_table_is_refused():
    with pytest.raises(ConfigError, match=r"data.user_key=cust name columns of the user feature table"):
        load_sources(_cfg(user_key="cust", items=None), frames={"train": TRAIN, "items": ITEMS})


def test_table_rows_without_interactions_are_counted_for_users_as_for_items(caplog):
    # "vocabularies: 3 users, 3 items (1 without training interactions)" left a user-table user without a row of
    # interactions uncounted: the log read as 3 users trained on when 2 were
    from twotower.pipeline.prepare import prepare

    users = pd.concat([USERS, pd.DataFrame({"cust": ["u3"], "country": ["FR"]})], ignore_index=True)
    src = load_sources(_cfg(item_key="sku", user_key="cust", user_categorical=("country",)),
                       frames={"train": TRAIN, "items": ITEMS, "users": users})
    with caplog.at_level("INFO", logger="twotower.pipeline.prepare"):
        prep = prepare(src)
    assert prep.report["vocab"] == {"users": 3, "items": 3, "items_without_training_interactions": 1,
                                    "users_without_training_interactions": 1}
    assert "vocabularies: 3 users (1 without training interactions), 3 items (1 without training interactions)" in \
        caplog.text


def test_a_table_column_with_the_name_the_key_takes_is_left_out_or_refused(caplog):
    """An item table keyed by `sku` with an external `item_id` column beside it (or a user table read by
    data.user_col=customer holding `user_id`): the key renamed item_id made two columns of one name, and training
    failed in a pandas traceback ("Cannot construct a Series from a DataFrame")."""
    items = ITEMS.assign(item_id=["ext-a", "ext-b", "ext-c"])
    users = pd.DataFrame({"customer": ["u1", "u2"], "user_id": ["x1", "x2"], "country": ["FR", "DE"]})
    with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
        src = load_sources(_cfg(item_key="sku", user_categorical=("country",)),
                           frames={"train": TRAIN, "items": items, "users": users})
    assert list(src.items["item_id"]) == ["a", "b", "c"] and list(src.items.columns).count("item_id") == 1
    assert list(src.users["user_id"]) == ["u1", "u2"] and list(src.users.columns).count("user_id") == 1
    assert "the column 'item_id' is left out: the run names the table's key column (data.item_key='sku')" in caplog.text
    assert "the column 'user_id' is left out: the run names the table's key column (data.user_col='customer')" in caplog.text
    with pytest.raises(ConfigError, match=r"the column 'item_id' is listed as a categorical feature, but the run names "
                                          r"the table's key column \(data.item_key='sku'\) 'item_id'"):
        load_sources(DataConfig(user_col="customer", item_col="product", item_key="sku", item_categorical=("item_id",)),
                     frames={"train": TRAIN, "items": items})
