"""TOML has no null: its "none" leaves every optional setting unset, text settings included."""
from __future__ import annotations

import pandas as pd
import pytest

from twotower.config import load_config
from twotower.errors import DataError


def test_none_in_a_toml_file_turns_optional_text_settings_off(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[data]\ntimestamp_col = "none"\nrating_col = "None"\ntitle_col = "null"\n'
                    'valid_start = "none"\n[train]\nthreads = "none"\n')
    cfg = load_config(path)
    assert (cfg.data.timestamp_col, cfg.data.rating_col, cfg.data.title_col) == (None, None, None)
    assert cfg.data.valid_start is None and cfg.train.threads is None
    # a plain text choice keeps its "none"
    path.write_text('[model.user]\nhistory = "none"\nuse_id = true\n')
    assert load_config(path).model.user.history == "none"


def test_yaml_and_overrides_keep_their_meaning(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("data:\n  timestamp_col: null\n  rating_col: none\n")
    cfg = load_config(path)
    assert cfg.data.timestamp_col is None and cfg.data.rating_col == "none"  # YAML writes null; "none" is text
    cfg = load_config(overrides=["data.timestamp_col=null", "data.rating_col=none"])
    assert cfg.data.timestamp_col is None and cfg.data.rating_col == "none"


def test_a_column_named_none_not_found_says_how_to_write_no_column(tmp_path):
    from twotower.data.readers import ColumnMap, read_interactions

    f = tmp_path / "x.csv"
    pd.DataFrame({"user_id": ["u1"], "item_id": ["i1"], "timestamp": [1]}).to_csv(f, index=False)
    with pytest.raises(DataError) as e:
        read_interactions(f, ColumnMap(rating="none"))
    msg = str(e.value)
    assert "data.rating_col=null" in msg and 'rating_col = "none"' in msg and "rating_col: null" in msg
