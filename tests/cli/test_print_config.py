"""`twotower train --print-config`: every setting, as a config file plus flags plus overrides resolve it.

Before: `train --help` named no setting, and the only way to see what a hand-written TOML resolved to was
to train and open OUT/config.json afterwards.
"""
from __future__ import annotations

import json

from twotower.cli.main import build_parser, main
from twotower.config import TrainConfig


def test_print_config_resolves_file_flags_and_overrides_without_data(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[data]\nuser_col = "customer"\n[train]\nepochs = 3\n', encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "--config", str(cfg), "--print-config", "--items", "items.csv", "loss.temperature=0.05",
                 "--out", str(out)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["data"]["user_col"] == "customer" and got["data"]["items"] == "items.csv"
    assert got["train"]["epochs"] == 3 and got["loss"]["temperature"] == 0.05
    assert got["train"]["batch_size"] == TrainConfig().batch_size and "item_key" in got["data"]
    assert not out.exists()  # nothing read, nothing written


def test_train_help_says_where_the_settings_are():
    text = build_parser()._subparsers._group_actions[0].choices["train"].format_help()
    assert "--print-config" in text and "model.user" in text and "config.json" in text


def test_set_takes_overrides_as_the_bench_scripts_do(capsys):
    # `--set` (bench/*.py's flag) was "unrecognized arguments: --set" here
    assert main(["train", "--print-config", "--set", "train.epochs=2", "loss.temperature=0.1", "--epochs", "2"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["train"]["epochs"] == 2 and got["loss"]["temperature"] == 0.1


def test_a_flag_and_an_override_of_one_setting_with_two_values_are_refused(tmp_path, capsys):
    # `--epochs 5 train.epochs=3` trained 5 epochs, whatever the order, without a word about the 3
    assert main(["train", "--print-config", "train.epochs=3", "--epochs", "5"]) != 0
    assert "--epochs 5 and the override train.epochs=3 set the same setting to different values; give one of them" \
        in capsys.readouterr().err
    assert main(["train", "--print-config", "--train", "a.csv", "--set", "data.train=b.csv"]) != 0
    assert "--train a.csv and the override data.train=\"b.csv\"" in capsys.readouterr().err
    # the same value twice, or a flag over a config file's value, is no clash
    cfg = tmp_path / "c.toml"
    cfg.write_text("[train]\nepochs = 30\n", encoding="utf-8")
    assert main(["train", "--config", str(cfg), "--print-config", "--epochs", "5", "train.epochs=5"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["epochs"] == 5


def test_no_progress_and_an_override_turning_progress_on_are_refused(capsys):
    # `--no-progress train.progress=true` kept the flag's false without a word, unlike --epochs and --threads
    assert main(["train", "--print-config", "--no-progress", "train.progress=yes"]) != 0
    assert ("error: --no-progress and the override train.progress=true set the same setting to different values; "
            "give one of them") in capsys.readouterr().err
    assert main(["train", "--print-config", "--no-progress", "train.progress=off"]) == 0  # the same value: no clash
    assert json.loads(capsys.readouterr().out)["train"]["progress"] is False


def test_train_help_names_every_section_of_the_config():
    # the list was written by hand and left out model.item_item, the section of the item-item term's settings
    import dataclasses
    import typing

    from twotower.config import RunConfig

    def sections(cls, prefix=""):
        for f in dataclasses.fields(cls):
            tp = typing.get_type_hints(cls)[f.name]
            if dataclasses.is_dataclass(tp):
                yield f"{prefix}{f.name}"
                yield from sections(tp, f"{prefix}{f.name}.")

    text = " ".join(build_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    listed = text.split("Settings: sections ", 1)[1].split(", as keys of", 1)[0].split(", ")
    assert sorted(listed) == sorted(sections(RunConfig)) and "model.item_item" in listed


def test_config_given_twice_merges_the_files_in_order(tmp_path, capsys):
    # a base recipe and a CI file (`--config base.toml --config ci.toml`): the first was dropped without a word
    base, ci = tmp_path / "base.toml", tmp_path / "ci.toml"
    base.write_text('[model.user]\nhistory = "mean"\n[loss]\ntemperature = 0.05\n[train]\nepochs = 9\n', encoding="utf-8")
    ci.write_text("[train]\nepochs = 3\n", encoding="utf-8")
    assert main(["train", "--config", str(base), "--config", str(ci), "--print-config"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["model"]["user"]["history"] == "mean" and got["loss"]["temperature"] == 0.05  # the first file's
    assert got["train"]["epochs"] == 3  # the later file's value of a key both set
    # an override still outranks every file; a bad value names the file that set it
    assert main(["train", "--config", str(base), "--config", str(ci), "--print-config", "train.epochs=4"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["epochs"] == 4
    ci.write_text("[loss]\ntemperature = -1\n", encoding="utf-8")
    assert main(["train", "--config", str(base), "--config", str(ci), "--print-config"]) == 2
    assert f"error: config file {ci}: loss.temperature" in capsys.readouterr().err
