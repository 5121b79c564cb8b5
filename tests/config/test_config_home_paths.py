"""``~`` in a config file's data paths names the home folder, as ``--train ~/...`` does on a command line.

Before: `train --config cfg.toml` with ``train = "~/tt/data/train.csv"`` stopped with "file ~/tt/data/train.csv:
file not found": no shell expands ``~`` inside a TOML file, and the readers took it as a folder named ``~``.
"""
from __future__ import annotations

from twotower.config import load_config


def test_home_in_config_file_data_paths_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg_file = tmp_path / "cfg.toml"
    cfg_file.write_text('[data]\ntrain = "~/tt/train.csv"\nvalid = "~/tt/valid.csv"\nitems = "~/tt/items.csv"\n'
                        'test = "relative/test.csv"\n', encoding="utf-8")
    cfg = load_config(cfg_file, ["data.users=~/tt/users.csv"])
    home = tmp_path / "home" / "tt"
    assert (cfg.data.train, cfg.data.valid, cfg.data.items, cfg.data.users) == (
        str(home / "train.csv"), str(home / "valid.csv"), str(home / "items.csv"), str(home / "users.csv"))
    assert cfg.data.test == "relative/test.csv"  # relative paths still start at the working directory
