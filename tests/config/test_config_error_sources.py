"""A check of two settings, one from a config file and one from an override, names where each came from."""
from __future__ import annotations

from pathlib import Path

import pytest

from twotower.config import ConfigError, load_config

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sasrec.toml"


def test_a_clash_of_a_file_value_and_an_override_names_both_places():
    with pytest.raises(ConfigError) as e:
        load_config(EXAMPLE, ["model.user.history=gru"], overrides_label="command line")
    assert str(e.value).endswith(f"[model.user.seq_positions: config file {EXAMPLE}; model.user.history: command line]")
    with pytest.raises(ConfigError) as e:
        load_config(EXAMPLE, ["model.item.out_dim=64"])
    assert str(e.value).endswith(f"[model.user.out_dim: config file {EXAMPLE}; model.item.out_dim: overrides]")


def test_a_file_alone_is_still_named_in_front(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[model.item]\nout_dim = 32\n")
    with pytest.raises(ConfigError, match=r"^config file .*c\.toml: model\.user\.out_dim: 64 must equal "
                                          r"model\.item\.out_dim 32$"):
        load_config(path)
