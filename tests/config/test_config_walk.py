"""Defects found walking the config path as a user: overrides, file types and file syntax."""
import pytest

from twotower.config import load_config
from twotower.errors import ConfigError


@pytest.mark.parametrize("raw, want", [("1", True), ("0", False), ("yes", True), ("off", False), ("true", True)])
def test_a_boolean_override_takes_one_and_zero(raw, want):
    # `model.user.use_id=1` arrived as the JSON number 1 and was refused ("expected true/false, got 1")
    # while the string "1" of a file was taken
    assert load_config(None, [f"model.user.use_id={raw}"]).model.user.use_id is want


def test_a_boolean_override_of_another_number_names_the_spellings():
    with pytest.raises(ConfigError, match=r"model.user.use_id: expected true/false \(or yes/no, on/off, 1/0\), got 2"):
        load_config(None, ["model.user.use_id=2"])


def test_an_override_given_twice_with_two_values_is_refused_on_the_command_line(capsys, tmp_path):
    # `train.epochs=3 ... train.epochs=4` trained 4 epochs without a word about the 3 (a file's key written
    # twice is refused); the same value twice is no clash, and load_config's list keeps the later value
    import json

    from twotower.cli.main import main

    assert main(["train", "--print-config", "train.epochs=3", "--set", "train.epochs=4"]) != 0
    assert ("error: command line: train.epochs is given twice with different values (train.epochs=3 and "
            "train.epochs=4); give it once") in capsys.readouterr().err
    assert main(["train", "--print-config", "train.epochs=4", "train.epochs=4.0"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["epochs"] == 4
    assert load_config(None, ["train.epochs=3", "train.epochs=4"]).train.epochs == 4
    inp = tmp_path / "in.csv"
    inp.write_text("user_id,item_id,timestamp\n1,2,3\n", encoding="utf-8")
    assert main(["data", "split", "--input", str(inp), "--out", str(tmp_path / "o"), "data.user_col=a",
                 "data.user_col=b"]) != 0
    assert "data.user_col is given twice with different values" in capsys.readouterr().err


@pytest.mark.parametrize("suffix, text, said", [
    (".toml", '[train]\nepochs = "5"\n', "train.epochs: expected a number, got the text '5'"),
    (".json", '{"model": {"user": {"use_id": "true"}}}', "model.user.use_id: expected true/false, got the text 'true'"),
    (".yaml", "eval:\n  ks: ['10', 20]\n", "eval.ks: expected a number, got the text '10'"),
])
def test_a_quoted_number_or_boolean_in_a_file_is_refused(tmp_path, suffix, text, said):
    # `epochs = "5"` trained 5 epochs as if unquoted: the file's own format says it is text
    path = tmp_path / f"c{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == f"config file {path}: {said}; write it without quotes"


def test_a_file_still_takes_none_for_an_optional_number_and_yaml_exponents(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('[train]\nthreads = "none"\n', encoding="utf-8")  # TOML has no null
    assert load_config(toml).train.threads is None
    yaml = tmp_path / "c.yaml"
    yaml.write_text("train:\n  lr: 1e-3\n  weight_decay: 5E-2\n", encoding="utf-8")  # YAML 1.1 read these as text
    cfg = load_config(yaml)
    assert (cfg.train.lr, cfg.train.weight_decay) == (0.001, 0.05)


def test_a_yaml_file_indented_with_a_tab_says_to_use_spaces(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n\tepochs: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"config file {path}: cannot parse (")
    assert "line 2, column 1" in str(e.value)
    assert str(e.value).endswith("; YAML indents with spaces, not tabs (a tab starts line 2)")


@pytest.mark.parametrize("suffix", [".toml", ".yaml", ".json"])
def test_an_empty_config_file_is_refused_not_read_as_the_defaults(tmp_path, suffix):
    path = tmp_path / f"c{suffix}"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (f"config file {path} is empty; write settings in it, or leave --config out for the "
                            "defaults")


@pytest.mark.parametrize(("suffix", "text"), [(".toml", "# my settings, later\n"), (".json", "{}"),
                                               (".yaml", "---\n# nothing yet\n")])
def test_a_config_file_without_settings_is_refused_as_an_empty_one_is(tmp_path, suffix, text):
    # comments alone, {} or --- trained on all the defaults, where an empty file is refused
    path = tmp_path / f"c{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (f"config file {path} holds no settings; write settings in it, or leave --config out for "
                            "the defaults")


def test_a_section_set_to_false_names_its_switch() -> None:
    # a walkthrough's guess `model.item_item=false` got "expected a section (table)" without the key to use
    from twotower.config import load_config
    from twotower.errors import ConfigError

    with pytest.raises(ConfigError, match=r"model\.item_item: expected a section \(table\), got False; to switch it "
                                          r"off, set model\.item_item\.enabled=false"):
        load_config(None, ["model.item_item=false"])


def _float_settings() -> list[tuple[type, str, str]]:
    """(class, field, the name errors give it) of every float setting of every config dataclass."""
    import dataclasses
    import typing

    from twotower import config as C

    prefixes = {C.DataConfig: "data.", C.TowerConfig: "tower.", C.ItemItemConfig: "model.item_item.",
                C.LossConfig: "loss.", C.TrainConfig: "train.", C.EvalConfig: "eval.", C.SearchConfig: "search.",
                C.PrepareConfig: "PrepareConfig.", C.FinetuneConfig: "FinetuneConfig.",
                C.RerankTrainConfig: "RerankTrainConfig."}
    out = []
    for cls, prefix in prefixes.items():
        for f in dataclasses.fields(cls):
            if float in C._plain_types(typing.get_type_hints(cls)[f.name]) and "tuple" not in str(f.type):
                out.append((cls, f.name, f"{prefix}{f.name}"))
    return out


@pytest.mark.parametrize("cls, key, name", _float_settings(), ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_hand_built_config_refuses_a_non_finite_number(cls, key, name, value):
    # a file or an override refused them, a dataclass built in Python took lr=inf (NaN weights), loss.temperature=inf
    # (every score 0: nothing learned) or time_budget_min=inf, saved it as `Infinity` in config.json, and the run
    # could not be loaded back ("train.time_budget_min: expected a finite number")
    with pytest.raises(ConfigError, match=rf"^{name}: expected a finite number, got {value!r}$"):
        cls(**{key: value})


def test_a_hand_built_config_round_trips_through_its_json():
    import json

    from twotower.config import RunConfig, TrainConfig, config_from_dict, config_to_dict

    cfg = RunConfig(train=TrainConfig(time_budget_min=90.0, grad_clip=1.0))
    assert config_from_dict(RunConfig, json.loads(json.dumps(config_to_dict(cfg), allow_nan=False))) == cfg


@pytest.mark.parametrize("cls_name, kwargs, said", [
    ("FinetuneConfig", {"weight_decay": -0.01}, "FinetuneConfig.weight_decay: must be >= 0, got -0.01"),
    ("RerankTrainConfig", {"weight_decay": -1.0}, "RerankTrainConfig.weight_decay: must be >= 0, got -1.0"),
    ("FinetuneConfig", {"grad_clip": -1.0}, "FinetuneConfig.grad_clip: must be >= 0 (the largest gradient norm; 0 = no clipping), got -1.0"),
    ("RerankTrainConfig", {"grad_clip": -1.0}, "RerankTrainConfig.grad_clip: must be >= 0 (the largest gradient norm; 0 = no clipping), got -1.0"),
    ("RerankTrainConfig", {"head_lr": -5e-3}, "RerankTrainConfig.head_lr: must be > 0, got -0.005"),
    ("RerankTrainConfig", {"head_lr": 0.0}, "RerankTrainConfig.head_lr: must be > 0, got 0.0"),
])
def test_search_and_rerank_training_refuse_a_negative_optimiser_setting(cls_name, kwargs, said):
    # accepted: weight_decay < 0 failed in AdamW once the model was loaded, a negative grad_clip or head_lr
    # stepped up the loss (clip_grad_norm_ scaled every gradient by a negative factor; torch checks no group's lr)
    import re

    from twotower import config as C

    with pytest.raises(ConfigError, match=f"^{re.escape(said)}$"):
        getattr(C, cls_name)(**kwargs)
    # 0 stays "no weight decay" / "no clipping"
    assert C.FinetuneConfig(weight_decay=0.0, grad_clip=0.0).grad_clip == 0.0
