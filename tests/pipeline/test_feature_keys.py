"""A feature table whose keys are written differently from the interactions' ids ("001" vs "1") is called out."""
from __future__ import annotations

import logging

import pandas as pd

from twotower.config import DataConfig
from twotower.pipeline.prepare import prepare
from twotower.pipeline.sources import load_sources


def _prepare(items: pd.DataFrame, caplog) -> list[str]:
    train = pd.DataFrame({"user_id": ["u1", "u1", "u2", "u3"], "item_id": ["1", "2", "2", "3"], "timestamp": [1, 2, 3, 4]})
    with caplog.at_level(logging.WARNING, logger="twotower.pipeline.prepare"):
        prep = prepare(load_sources(DataConfig(item_categorical=("genre",)), frames={"train": train, "items": items}))
    return prep.item_vocab.ids


def test_zero_padded_table_keys_are_named_with_an_example(caplog):
    items = pd.DataFrame({"item_id": ["001", "002", "003"], "genre": ["a", "b", "a"]})
    ids = _prepare(items, caplog)
    assert len(ids) == 6  # what the warning is about: each item twice, the interacted copy without features
    assert "3 item ids of the interactions have no row in it" in caplog.text and "'1' vs '001'" in caplog.text


def test_float_written_table_keys_are_named_with_an_example(caplog):
    # pandas writes an integer id column holding a blank as floats, so a CSV item table's keys read "1.0"
    items = pd.DataFrame({"item_id": ["1.0", "2.0", "3.0"], "genre": ["a", "b", "a"]})
    _prepare(items, caplog)
    assert "3 item ids of the interactions have no row in it" in caplog.text and "'1' vs '1.0'" in caplog.text


def test_a_table_that_matches_says_nothing(caplog):
    items = pd.DataFrame({"item_id": ["1", "2", "3", "4"], "genre": ["a", "b", "a", "b"]})  # "4": not yet interacted
    assert len(_prepare(items, caplog)) == 4
    assert "table (--items)" not in caplog.text


def test_a_table_of_other_ids_altogether_is_called_out(caplog):
    items = pd.DataFrame({"item_id": ["x", "y", "z"], "genre": ["a", "b", "a"]})
    _prepare(items, caplog)
    assert "3 of 3 item ids of the interactions have no row in it" in caplog.text


def test_a_column_named_by_two_feature_settings_names_the_settings():
    """The error read "FeatureSpec.multi: column 'tags' is already listed under categorical": no setting a user
    wrote. It names data.item_multi and data.item_categorical (and the key's setting for a key column)."""
    import pytest

    from twotower.errors import ConfigError

    train = pd.DataFrame({"user_id": ["u1", "u2"], "item_id": ["1", "2"], "timestamp": [1, 2]})
    items = pd.DataFrame({"item_id": ["1", "2"], "tags": ["a|b", "c"]})
    cfg = DataConfig(item_categorical=("tags",), item_multi=("tags",))
    with pytest.raises(ConfigError) as e:
        load_sources(cfg, frames={"train": train, "items": items})
    assert str(e.value) == ("data.item_multi: column 'tags' is already listed in data.item_categorical; a column is "
                            "one kind of feature")
    users = pd.DataFrame({"customer": ["u1", "u2"], "age": [1, 2]})
    with pytest.raises(ConfigError) as e:
        load_sources(DataConfig(user_key="customer", user_numeric=("customer",)), frames={"train": train, "users": users})
    assert str(e.value) == "data.user_numeric: 'customer' is the user table's key (data.user_key), not a feature"
