"""A text setting keeps what was typed: an override's `1e3` or `true` is not a number or a boolean printed back."""
from __future__ import annotations

import pytest

from twotower.config import load_config
from twotower.errors import ConfigError


@pytest.mark.parametrize("override, key, want", [
    ("data.title_col=1e3", "title_col", "1e3"),          # was the column '1000.0'
    ("data.history_verb=true", "history_verb", "true"),  # was "You already True ..."
    ("data.user_col=1.50", "user_col", "1.50"),          # was '1.5'
])
def test_an_override_of_a_text_setting_is_the_text_typed(override, key, want):
    assert getattr(load_config(overrides=[override]).data, key) == want


def test_overrides_of_other_settings_still_read_json():
    cfg = load_config(overrides=["train.epochs=3", "data.timestamp_col=null", "loss.logq=false"])
    assert (cfg.train.epochs, cfg.data.timestamp_col, cfg.loss.logq) == (3, None, False)


def test_a_boolean_in_a_file_for_a_text_setting_is_refused_naming_file_and_key(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[data]\nhistory_verb = true\n")
    with pytest.raises(ConfigError, match=f"config file {f}: data.history_verb: expected a string, got true; write "
                                          "it in quotes"):
        load_config(f)
