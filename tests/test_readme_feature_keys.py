"""The README's own-data section documents every feature-table setting DataConfig has, with its default."""
from __future__ import annotations

import re
from pathlib import Path

from twotower.config import DataConfig
from twotower.pipeline.sources import ITEM_FEATURE_SETTINGS, USER_FEATURE_SETTINGS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_feature_table_setting_is_in_the_readme():
    """data.item_text (and data.user_numeric / data.user_multi) existed but no page named them: a text column
    was only found through --print-config."""
    keys = (*ITEM_FEATURE_SETTINGS, *USER_FEATURE_SETTINGS, "items", "users", "item_key", "user_key",
            "multi_separator", "title_col", "history_verb")
    # as a dotted override (data.item_text=...) or a key of the TOML example (item_text = ...)
    missing = [k for k in keys if not re.search(rf"(\bdata\.{k}\b|^{k} +=)", README, re.M)]
    assert missing == []


def test_the_defaults_the_readme_states_are_the_config_s():
    assert f'(default "{DataConfig.history_verb}")' in README
    sep = DataConfig.multi_separator
    assert f'item_multi = ["tags"]        # "a{sep}b{sep}c"' in README
