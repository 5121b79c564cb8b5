"""A misnamed feature column's error names the one setting that lists it, of the table being read.

It read "Set data.item_numeric / data.user_numeric=NAME to the right column" while reading the item table: two
settings, one of another table, and "=NAME" for a setting that holds a list of columns."""
from __future__ import annotations

import pytest

from twotower.data.features import FeatureSpec, read_feature_table
from twotower.errors import DataError


@pytest.mark.parametrize("kind, group, field", [("item", "numeric", "numeric"), ("user", "categorical", "categorical"),
                                                ("item", "multi", "multi"), ("item", "text", "text")])
def test_a_misnamed_feature_column_names_its_tables_setting(tmp_path, kind, group, field):
    p = tmp_path / f"{kind}s.csv"
    p.write_text("id,year\n1,1995\n")
    spec = FeatureSpec(key="id", **{field: ("yeer",)})
    with pytest.raises(DataError) as e:
        read_feature_table(p, spec, name=str(p), key_role=f"{kind} key")
    msg = str(e.value)
    label = {"multi": "multi-valued"}.get(group, group)
    assert f"column 'yeer' (the {kind} {label} column) not found" in msg
    assert msg.endswith(f"did you mean 'year'? Correct the name in data.{kind}_{group}, or rename the column.")
    assert "/" not in msg.split("?")[-1]


def test_a_misnamed_key_column_still_names_its_setting(tmp_path):
    p = tmp_path / "items.csv"
    p.write_text("sku,year\n1,1995\n")
    with pytest.raises(DataError) as e:
        read_feature_table(p, FeatureSpec(key="item_id", numeric=("year",)), name=str(p), key_role="item key")
    assert "(the item key column)" in str(e.value) and "Set data.item_key=NAME to the right column" in str(e.value)
