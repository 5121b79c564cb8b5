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


@pytest.mark.parametrize("override, said", [
    ("train.lr=abc", "train.lr: expected a number, got 'abc'"),
    ("model.user.hidden=[a]", "model.user.hidden: expected an integer, got 'a'"),
    ("model.user.out_dim=7", "model.user.out_dim: 7 must equal model.item.out_dim 64"),
])
def test_a_bad_value_typed_on_the_command_line_says_so_as_a_file_is_named(override, said, tmp_path, monkeypatch,
                                                                           capsys):
    """`train ... train.lr=abc` said only "train.lr: expected a number", while the same value in a config file said
    "config file c.toml: ..."; beside a --config the user searched the file for it."""
    from twotower.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text("[train]\nepochs = 2\n")
    for config in ([], ["--config", "c.toml"]):
        assert main(["train", "--dataset", "movielens-100k", "--print-config", *config, override]) == 2
        assert capsys.readouterr().err.strip() == f"error: command line: {override!r}: {said}"
    # the Python call's overrides are named as the unknown-setting refusal names them
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["train.epochs=3", override])
    assert str(e.value) == f"overrides: {override!r}: {said}"


def test_a_data_check_of_two_settings_names_the_config_file(tmp_path, capsys):
    # `[data] split = "time"` alone: "error: data.split='time' needs data.valid_start and data.test_start", where a
    # bad value of one key names the file ("config file n16.toml: ...")
    from twotower.cli.main import main
    from twotower.pipeline.sources import load_sources

    path = tmp_path / "n16.toml"
    path.write_text('[data]\nsplit = "time"\n', encoding="utf-8")
    assert main(["train", "--config", str(path), "--print-config"]) == 2
    assert capsys.readouterr().err.strip() == (f"error: config file {path}: data.split='time' needs data.valid_start "
                                               "and data.test_start")
    with pytest.raises(ConfigError, match=rf"^config file {path}: data.split='time' needs"):
        load_sources(load_config(path, ["data.path=x.csv"]).data)
    # one of the settings typed on the command line: each is named by where it was given
    path.write_text('[data]\nsplit = "leave_last"\n', encoding="utf-8")
    assert main(["train", "--config", str(path), "--print-config", "data.valid_start=2024-05-01"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"[data.valid_start: override; data.split: config file {path}]")


def test_every_unknown_key_of_a_file_is_named_at_once(tmp_path):
    # `[train] batchsize = 3 / epoch = 2` named batchsize alone: fixed, the next run named epoch
    path = tmp_path / "n17.toml"
    path.write_text("[train]\nbatchsize = 3\nepoch = 2\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (f"config file {path}: unknown settings 'train.batchsize' (did you mean train.batch_size?) "
                            "and 'train.epoch' (did you mean train.epochs?)")
    path.write_text("[train]\nepoch = 2\n", encoding="utf-8")  # one: as before
    with pytest.raises(ConfigError, match=r"unknown setting 'train.epoch'; did you mean train.epochs\?$"):
        load_config(path)
