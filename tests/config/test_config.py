from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from twotower.config import DataConfig, ModelConfig, RunConfig, TowerConfig, TrainConfig, config_to_dict, load_config
from twotower.errors import ConfigError


def test_defaults_validate_and_round_trip():
    cfg = load_config()
    assert isinstance(cfg, RunConfig)
    again = load_config(base=config_to_dict(cfg))
    assert again == cfg


def test_dotted_overrides_are_typed():
    cfg = load_config(overrides=["train.epochs=3", "model.user.hidden=[128,64]", "loss.logq=false", "loss.temperature=0.1"])
    assert cfg.train.epochs == 3
    assert cfg.model.user.hidden == (128, 64)
    assert cfg.loss.logq is False
    assert cfg.loss.temperature == pytest.approx(0.1)


def test_unknown_key_suggests_the_right_one():
    with pytest.raises(ConfigError, match=r"train\.epoch.*epochs"):
        load_config(overrides=["train.epoch=3"])


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("loss.temperature=0", "loss.temperature"),
        ("loss.kind=hinge", "loss.kind"),
        ("train.batch_size=1", "train.batch_size"),
        ("data.ratios=[0.5,0.5,0.5]", "data.ratios"),
        ("train.epochs=abc", "train.epochs"),
        ("model.user.dropout=1.5", "model.user.dropout"),
        ("train.max_examples_per_epoch=-5", "train.max_examples_per_epoch"),  # cut every epoch to no batch
        ("train.max_examples_per_epoch=0", "train.max_examples_per_epoch"),  # read as "no limit"
        ("train.eval_every=0", "train.eval_every"),  # was a ZeroDivisionError after the first epoch
    ],
)
def test_bad_values_name_the_setting(override, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        load_config(overrides=[override])


def test_toml_and_yaml_files(tmp_path):
    (tmp_path / "c.toml").write_text('[train]\nepochs = 4\n[loss]\ntemperature = 0.2\n')
    (tmp_path / "c.yaml").write_text("train:\n  epochs: 5\nmodel:\n  user:\n    history: mean\n")
    assert load_config(tmp_path / "c.toml").train.epochs == 4
    y = load_config(tmp_path / "c.yaml", ["train.epochs=6"])
    assert y.train.epochs == 6 and y.model.user.history == "mean"


def test_broken_config_file_is_a_clear_error(tmp_path):
    (tmp_path / "bad.toml").write_text("[train\nepochs = ")
    with pytest.raises(ConfigError, match="bad.toml"):
        load_config(tmp_path / "bad.toml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")


def test_override_without_equals_is_rejected():
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(overrides=["train.epochs"])


def test_partial_section_keeps_the_sections_own_defaults():
    # the default user tower pools history without an ID; overriding one field must not reset that
    cfg = load_config(overrides=["model.user.hidden=[32]"])
    assert cfg.model.user.history == "recency" and cfg.model.user.use_id is False
    assert cfg.model.user.hidden == (32,)


def test_none_is_a_string_choice_and_null_clears_optional_numbers():
    cfg = load_config(overrides=["model.user.history=none", "model.user.use_id=true", "train.threads=none",
                                 "train.max_examples_per_epoch=null"])
    assert cfg.model.user.history == "none"
    assert cfg.train.threads is None and cfg.train.max_examples_per_epoch is None


# ---------------------------------------------------------------- regressions found by fuzzing (issue 7)


def test_non_utf8_config_file_is_a_config_error_naming_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_bytes(b"\x80[train]\n")
    with pytest.raises(ConfigError, match=r"run\.toml: not UTF-8"):
        load_config(path)


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity", "1e400"])
def test_non_finite_float_settings_are_refused(value):
    with pytest.raises(ConfigError, match="loss.temperature: expected a finite number"):
        load_config(overrides=[f"loss.temperature={value}"])


def test_huge_integer_setting_keeps_its_exact_value():
    assert load_config(overrides=["train.seed=12345678901234567890"]).train.seed == 12345678901234567890


def test_unknown_key_names_where_it_was_written(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[train]\nepocs = 4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config file .*c\.toml: unknown setting 'train\.epocs'; did you mean train\.epochs\?"):
        load_config(path)
    nested = tmp_path / "n.yaml"
    nested.write_text("model:\n  user:\n    hiden: [32]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config file .*n\.yaml: unknown setting 'model\.user\.hiden'"):
        load_config(nested)
    # a good file with a typo in the overrides points at the overrides, not the file: from Python they are
    # load_config's overrides (it said "command line" there too), on the CLI the command line
    good = tmp_path / "g.toml"
    good.write_text("[train]\nepochs = 4\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^overrides: unknown setting 'train\.epoch'"):
        load_config(good, ["train.epoch=3"])
    with pytest.raises(ConfigError, match=r"^command line: unknown setting 'train\.epoch'"):
        load_config(good, ["train.epoch=3"], overrides_label="command line")


def test_the_cli_names_the_command_line_for_a_typo_in_its_overrides(tmp_path, capsys):
    from twotower.cli.main import main

    assert main(["train", "--out", str(tmp_path / "run"), "--dataset", "movielens-100k", "train.epoch=3"]) == 2
    assert capsys.readouterr().err.startswith("error: command line: unknown setting 'train.epoch'; did you mean")


def test_bad_choice_names_the_dotted_setting_the_file_and_the_nearest_choice(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[model.user]\nhistory = "transfomer"\n')
    with pytest.raises(ConfigError) as e:
        load_config(cfg)
    msg = str(e.value)
    assert msg.startswith(f"config file {cfg}: model.user.history:") and "did you mean 'transformer'" in msg
    # the same value given on the command line is not blamed on the file: the overrides are named instead
    with pytest.raises(ConfigError) as e:
        load_config(cfg, ["model.user.history=gr"], overrides_label="command line")
    assert str(e.value).startswith("command line: 'model.user.history=gr': model.user.history: 'gr'")
    assert "config file" not in str(e.value)
    with pytest.raises(ConfigError, match=r"^overrides: 'model\.item\.history=bogus': model\.item\.history:"):
        load_config(None, ["model.item.history=bogus"])


def test_a_section_built_by_hand_must_be_its_dataclass():
    # a dict used to be kept, and training failed later: AttributeError: 'dict' object has no attribute 'threads'
    with pytest.raises(ConfigError, match=r"^train: expected a TrainConfig, got dict; .*load_config\(base=\{'train': "):
        RunConfig(train={"epochs": 3})
    with pytest.raises(ConfigError, match=r"^model.user: expected a TowerConfig, got dict; .*\{'model': \{'user': "):
        ModelConfig(user={"history": "mean"})
    assert RunConfig(train=TrainConfig(epochs=3)).train.epochs == 3
    assert RunConfig(model=ModelConfig(user=TowerConfig(history="mean"))).model.user.history == "mean"


def test_overrides_given_as_one_string_or_a_dict_are_refused_with_the_spelling_to_use():
    # a string used to be read letter by letter: "override 't' must look like section.key=value"
    with pytest.raises(ConfigError, match=r"overrides must be a list .* got a str; write \['train.epochs=2'\]"):
        load_config(overrides="train.epochs=2")
    with pytest.raises(ConfigError, match=r"got a dict; write load_config\(base="):
        load_config(overrides={"train.epochs": 2})
    assert load_config(overrides=("train.epochs=2",)).train.epochs == 2
    # a dict (or a RunConfig) in the path's place failed in pathlib: "expected str, bytes or os.PathLike object"
    with pytest.raises(ConfigError, match=r"first argument is a config file's path, got a dict; pass settings as "
                                          r"load_config\(base=\.\.\.\)"):
        load_config({"train": {"epochs": 2}})
    with pytest.raises(ConfigError, match=r"got a RunConfig; pass settings as load_config\(base="):
        load_config(load_config())


def test_a_run_config_is_a_base_too():
    # load_config(base=run.config, ...) used to fail with "Object of type RunConfig is not JSON serializable"
    cfg = load_config(overrides=["train.epochs=3", "model.user.history=mean"])
    again = load_config(base=cfg, overrides=["train.lr=0.01"])
    assert (again.train.epochs, again.model.user.history, again.train.lr) == (3, "mean", 0.01)
    assert load_config(base=cfg) == cfg


def test_hand_built_settings_have_their_annotated_types() -> None:
    """From Python, TrainConfig(epochs=2.5) or epochs="3" was accepted and failed far from the cause."""
    import numpy as np

    from twotower.config import DataConfig, EvalConfig, LossConfig, TowerConfig, TrainConfig

    for build, message in [(lambda: TrainConfig(epochs=2.5), "train.epochs: expected int, got 2.5"),
                           (lambda: TrainConfig(epochs="3"), "train.epochs: expected int, got '3'"),
                           (lambda: LossConfig(temperature="0.1"), "loss.temperature: expected float"),
                           (lambda: TowerConfig(hidden=[256, "a"]), "tower.hidden: expected tuple"),
                           (lambda: EvalConfig(ks=10), "eval.ks: expected tuple"),
                           (lambda: TrainConfig(progress=1), "train.progress: expected bool"),
                           (lambda: DataConfig(ratios=(0.8, 0.2)), "data.ratios: needs three numbers")]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            build()
    # what a user means is kept, as plain values (config.json is JSON): numpy ints, an int rate, a list of sizes
    cfg = TrainConfig(epochs=np.int64(3), lr=1, seed=np.int32(5))
    assert (type(cfg.epochs), type(cfg.lr), type(cfg.seed)) == (int, float, int)
    assert TowerConfig(hidden=[128]).hidden == (128,)


@pytest.mark.parametrize("verb", ["", "   ", "x" * 41])
def test_the_explanation_verb_is_a_short_word(verb):
    with pytest.raises(ConfigError, match="data.history_verb"):
        DataConfig(history_verb=verb)


@pytest.mark.parametrize("override, fragment", [
    ("model.item.history=recency", "model.item.history='recency': only the user tower reads history"),
    ("model.item.history=transformer", "model.item.history='transformer': only the user tower"),
    ("model.user.text_embeddings=true", "model.user.text_embeddings=True: only the item tower reads text_embeddings"),
    ("model.user.dual_head=true", "model.user.dual_head=True: only the item tower"),
])
def test_a_setting_of_the_other_tower_is_refused_not_ignored(override, fragment):
    """Both towers share TowerConfig, so model.user.text_embeddings=true or model.item.history=recency were
    accepted, written to config.json and ignored: a run trained without what its config said."""
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert fragment in str(e.value)


def test_each_tower_keeps_its_own_settings():
    cfg = load_config(None, ["model.user.history=transformer", "model.user.seq_layers=3", "model.item.dual_head=true",
                             "model.item.text_embeddings=true"])
    assert cfg.model.user.seq_layers == 3 and cfg.model.item.dual_head and cfg.model.item.text_embeddings
    # sizes are not switches: one dict of them for both towers still builds
    sizes = dict(hidden=(16,), out_dim=8, history_dim=8, history_len=4, seq_layers=1)
    ModelConfig(user=TowerConfig(use_id=True, history="recency", **sizes), item=TowerConfig(**sizes))


@pytest.mark.parametrize("setting", ["timestamp_col", "rating_col", "item_key", "user_key", "title_col"])
def test_an_empty_optional_column_name_names_the_setting_and_null(setting):
    # `data.timestamp_col=` passed --print-config, then failed the read with "ColumnMap.timestamp must be ..."
    with pytest.raises(ConfigError, match=rf"^overrides: 'data\.{setting}=': data\.{setting}: must be a column name, or null for none "
                                          rf"\(data\.{setting}=null\), got ''$"):
        load_config(overrides=[f"data.{setting}="])
    assert getattr(load_config(overrides=[f"data.{setting}=null"]).data, setting) is None


def test_one_column_in_two_roles_names_both_settings():
    # refused only when the file was read, as "ColumnMap maps one column to two roles: ['user_id', 'item_id',
    # 'rating', 'rating']", naming neither setting
    with pytest.raises(ConfigError, match=r"^data\.timestamp_col and data\.rating_col: both name column "
                                          r"'rating'; each role needs its own column \(data\.rating_col=null if the "
                                          r"file has no rating column\)$"):
        load_config(overrides=["data.timestamp_col=rating"])
    with pytest.raises(ConfigError, match=r"data\.user_col and data\.item_col: both name column 'user_id'; each role "
                                          r"needs its own column$"):
        DataConfig(item_col="user_id")
    assert load_config(overrides=["data.timestamp_col=rating", "data.rating_col=null"]).data.timestamp_col == "rating"


@pytest.mark.parametrize("setting", ["user_col", "item_col"])
def test_an_empty_id_column_name_names_the_setting(tmp_path, setting):
    (tmp_path / "c.toml").write_text(f'[data]\n{setting} = " "\n')
    with pytest.raises(ConfigError, match=rf"^config file .*c\.toml: data\.{setting}: must be a column name, got ' '$"):
        load_config(tmp_path / "c.toml")


def test_a_setting_written_outside_its_section_names_the_section(tmp_path):
    # `epochs = 3` above any [train] header read "unknown setting 'epochs'; valid keys: data, model, ..."
    path = tmp_path / "flat.toml"
    path.write_text("epochs = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^config file .*flat\.toml: unknown setting 'epochs'; settings sit in a "
                                          r"section: did you mean train\.epochs\? \(valid sections: data, model, "):
        load_config(path)
    with pytest.raises(ConfigError, match=r"^overrides: unknown setting 'hidden'; .*did you mean "
                                          r"model\.user\.hidden or model\.item\.hidden\?"):
        load_config(overrides=["hidden=[8]"])
    with pytest.raises(ConfigError, match=r"unknown setting 'nonsense'; valid keys: data, model"):
        load_config(overrides=["nonsense=1"])


def test_split_ratios_name_a_nan_and_print_their_sum_plainly() -> None:
    """`--ratios nan,0.1,0.1` said "must be non-negative"; a wrong sum showed float noise (1.2000000000000002)."""
    from twotower.config import DataConfig

    with pytest.raises(ConfigError, match=re.escape("data.ratios: must be finite numbers, got nan, 0.1, 0.1")):
        DataConfig(ratios=(float("nan"), 0.1, 0.1))
    with pytest.raises(ConfigError, match=re.escape("data.ratios: must sum to 1, got 1.2")) as err:
        DataConfig(ratios=(0.8, 0.2, 0.2))
    assert "1.2000000000000002" not in str(err.value)


@pytest.mark.parametrize("override, message", [
    ("eval.baselines=null", "eval.baselines: expected a list, got null; write [] for none"),
    ("data.item_categorical=null", "data.item_categorical: expected a list, got null; write [] for none"),
    ("data.user_col=null", "data.user_col: expected a string, got null"),
])
def test_null_for_a_list_or_a_plain_string_is_refused_not_read_as_the_word_none(override, message):
    # null was read as [None] and then str(None): a baseline, or a column, called "None"
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert str(e.value) == f"overrides: {override!r}: {message}"
    assert load_config(overrides=["eval.baselines=[]"]).eval.baselines == ()


def test_a_select_metric_validation_cannot_compute_is_refused_with_the_file(tmp_path):
    # it passed load_config and --print-config and was refused by the Trainer, after the data was read
    path = tmp_path / "c.toml"
    path.write_text('[eval]\nselect_metric = "ndcg@10"\n')
    with pytest.raises(ConfigError, match=rf"^config file {re.escape(str(path))}: eval.select_metric: metric "
                                          r"'ndcg@10' is not of the form NAME@K with NAME in \[.*'NDCG'"):
        load_config(path)
    assert load_config(overrides=["eval.select_metric=Recall@7"]).eval.select_metric == "Recall@7"


def test_a_zero_tower_width_names_the_tower_the_key_and_the_file(tmp_path):
    # it was "tower dims: must be > 0", naming neither the tower nor which of three widths
    path = tmp_path / "c.toml"
    path.write_text("[model.item]\nid_dim = 0\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == f"config file {path}: model.item.id_dim: must be > 0, got 0"
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["model.user.feature_dim=-1"])
    assert str(e.value) == "overrides: 'model.user.feature_dim=-1': model.user.feature_dim: must be > 0, got -1"


@pytest.mark.parametrize("override, message", [
    ("train.grad_clip=-1", "train.grad_clip: must be >= 0 (the largest gradient norm; 0 or null = no clipping), got -1"),
    ("train.weight_decay=-0.1", "train.weight_decay: must be >= 0, got -0.1"),
])
def test_a_negative_clip_norm_or_weight_decay_is_refused(override, message):
    # grad_clip=-1 was accepted, and clip_grad_norm_ then scaled every gradient by a negative factor
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert str(e.value) == f"overrides: {override!r}: {message}"  # where it was given, as a file is named
    assert load_config(overrides=["train.grad_clip=0"]).train.grad_clip == 0.0  # no clipping, as null


@pytest.mark.parametrize("value", [0, -4])
def test_a_history_width_below_one_is_refused(value):
    # -4 was a torch traceback after the data was read ("Trying to create tensor with negative dimension"),
    # 0 trained a user tower that read its history as nothing
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[f"model.user.history_dim={value}"])
    assert str(e.value) == f"overrides: 'model.user.history_dim={value}': model.user.history_dim: must be > 0, got {value}"


@pytest.mark.parametrize("suffix, text", [(".toml", "[train]\nepochs = 3\n"), (".json", '{"train": {"epochs": 3}}')])
def test_a_config_file_saved_with_a_byte_order_mark_is_read(tmp_path, suffix, text):
    # Notepad's and PowerShell 5's UTF-8 starts with a BOM: "cannot parse (Invalid statement (at line 1, column 1))"
    path = tmp_path / f"c{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_config(path).train.epochs == 3


@pytest.mark.parametrize("text, said", [
    ("[train]\ntemperature = 0.1\n", "unknown setting 'train.temperature'; did you mean loss.temperature? "
                                     "(valid keys of train: epochs, "),
    ("[model]\nhidden = [128]\n", "unknown setting 'model.hidden'; did you mean model.user.hidden or "
                                  "model.item.hidden? (valid keys of model: user, item, share_item_embeddings, item_item)"),
])
def test_a_setting_written_in_another_section_names_its_section(tmp_path, text, said):
    # it listed the section's own keys, none of which was the one meant
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"config file {path}: {said}")


def test_a_mismatch_of_two_settings_names_the_file_that_gave_one_and_both_values(tmp_path):
    # "model.user.out_dim: must equal model.item.out_dim": no file, no values, though only the file set a width
    path = tmp_path / "c.toml"
    path.write_text("[model.item]\nout_dim = 32\n")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == f"config file {path}: model.user.out_dim: 64 must equal model.item.out_dim 32"
    with pytest.raises(ConfigError) as e:
        load_config(path, ["model.user.out_dim=16"])  # the command line gave one of them: each place is named
    assert str(e.value) == ("model.user.out_dim: 16 must equal model.item.out_dim 32 "
                            f"[model.item.out_dim: config file {path}; model.user.out_dim: overrides]")


@pytest.mark.parametrize("suffix, text, said", [
    (".json", '{"train": {"epochs": 3, "epochs": 5}}', "key 'epochs' appears twice in one object"),
    (".yaml", "train:\n  epochs: 3\n  lr: 0.01\n  epochs: 5\n", "key 'epochs' appears twice in one mapping (line 4)"),
    (".yaml", "train:\n  epochs: 3\ntrain:\n  lr: 0.01\n", "key 'train' appears twice in one mapping (line 3)"),
])
def test_a_setting_given_twice_in_a_json_or_yaml_file_is_refused(tmp_path, suffix, text, said):
    # both parsers kept the last value without a word (TOML's refuses the file itself): epochs=5 trained,
    # or a whole second [train] table replaced the first
    path = tmp_path / f"c{suffix}"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(f"config file {path}: {said}; give each setting once")):
        load_config(path)


@pytest.mark.parametrize("text, said", [
    ("[train]\nepochs = 3\nepochs = 4\n", "'epochs' is given twice (the second time on line 3); give each setting once"),
    ("train.epochs = 3\ntrain.epochs = 4\n",
     "'train.epochs' is given twice (the second time on line 2); give each setting once"),
    ("[train]\nepochs = 3\n[model]\n[train]\nlr = 0.1\n",
     "the table [train] is given twice (the second time on line 4); write its settings under one"),
])
def test_a_setting_given_twice_in_a_toml_file_names_it(tmp_path, text, said):
    # tomllib refuses the file, but says only "Cannot overwrite a value (at line 3, column 11)": JSON's and YAML's
    # refusals name the key
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"config file {path}: cannot parse (") and str(e.value).endswith(said), e.value


def test_a_yaml_file_with_anchors_and_lists_still_reads(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  user: &tower\n    hidden: [128]\n  item: *tower\ntrain:\n  epochs: 4\n")
    cfg = load_config(path)
    assert (cfg.train.epochs, cfg.model.user.hidden, cfg.model.item.hidden) == (4, (128,), (128,))


@pytest.mark.parametrize("overrides, message", [
    (["loss.kind=sampled", "loss.sampler=popularity", "loss.uniform_negatives=256"],
     "loss.uniform_negatives: 256 adds uniform negatives to the in-batch softmax only; loss.kind=sampled would ignore "
     "it. Set loss.kind=inbatch, or loss.uniform_negatives=0"),
    (["loss.kind=full", "loss.uniform_negatives=16"], "loss.kind=full would ignore it"),
    (["loss.sampler=popularity"],
     "loss.sampler: popularity draws the negatives of the sampled softmax only; loss.kind=inbatch would ignore it. "
     "Set loss.kind=sampled, or leave loss.sampler out"),
    (["loss.kind=bpr", "loss.sampler=popularity"], "loss.kind=bpr would ignore it"),
])
def test_a_loss_setting_of_another_loss_kind_is_refused_not_ignored(overrides, message):
    """loss.kind=sampled with loss.uniform_negatives=256 (a popularity + uniform mixture, one would think) trained on
    the sampler's negatives alone, and loss.sampler=popularity beside the in-batch softmax changed nothing."""
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    assert message in str(e.value)


def test_each_loss_kind_keeps_its_own_settings(tmp_path):
    assert load_config(None, ["loss.uniform_negatives=64"]).loss.uniform_negatives == 64
    cfg = load_config(None, ["loss.kind=sampled", "loss.sampler=popularity", "loss.sampled_negatives=128"])
    assert (cfg.loss.sampler, cfg.loss.sampled_negatives) == ("popularity", 128)
    # a size is not a switch: sampled_negatives beside another kind builds, as tower sizes do
    assert load_config(None, ["loss.kind=full", "loss.sampled_negatives=64"]).loss.kind == "full"
    path = tmp_path / "c.toml"
    path.write_text('[loss]\nkind = "bpr"\nsampler = "popularity"\n')
    with pytest.raises(ConfigError, match=r"^config file .*c\.toml: loss\.sampler: popularity"):
        load_config(path)


def test_window_settings_without_window_examples_are_refused_at_config_load(tmp_path):
    """train.random_windows=true beside causal examples was accepted and did nothing, and train.examples=sequence
    with a pooled user tower passed --print-config, to be refused only once the data had been read."""
    with pytest.raises(ConfigError) as e:
        load_config(None, ["train.random_windows=true"])
    assert str(e.value) == ("overrides: 'train.random_windows=true': train.random_windows: true draws the windows of train.examples=sequence only; "
                            "train.examples=causal would ignore it. Set train.examples=sequence, or leave "
                            "train.random_windows out")
    path = tmp_path / "c.toml"
    path.write_text('[train]\nexamples = "sequence"\n')
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (f"config file {path}: train.examples: sequence needs a sequence user tower, and "
                            "model.user.history is recency; set model.user.history=transformer or gru, or "
                            "train.examples=causal")
    cfg = load_config(None, ["model.user.history=gru", "train.examples=sequence", "train.random_windows=true"])
    assert cfg.train.random_windows and cfg.train.examples == "sequence"


def test_denoise_keep_without_denoising_examples_is_refused_at_config_load():
    """train.denoise_keep=0.3 beside the default causal examples was accepted and trained unthinned inputs."""
    with pytest.raises(ConfigError) as e:
        load_config(None, ["train.denoise_keep=0.3"])
    assert str(e.value) == ("overrides: 'train.denoise_keep=0.3': train.denoise_keep: 0.3 thins the inputs of train.examples=denoising (or both) only; "
                            "train.examples=causal would ignore it. Set train.examples=denoising or both, or leave "
                            "train.denoise_keep out")
    with pytest.raises(ConfigError, match=r"train\.denoise_keep: 0\.5 .* train\.examples=sequence would ignore it"):
        load_config(None, ["model.user.history=gru", "train.examples=sequence", "train.denoise_keep=0.5"])
    for examples in ("denoising", "both"):
        assert load_config(None, [f"train.examples={examples}", "train.denoise_keep=0.3"]).train.denoise_keep == 0.3
    assert load_config(None, ["train.denoise_keep=0.8"]).train.examples == "causal"  # the default is free


def test_transformer_switches_beside_another_history_are_refused_at_config_load(tmp_path):
    """model.user.seq_positions=left / seq_block=sasrec beside the default recency pooling (or a GRU, e.g.
    examples/sasrec.toml with model.user.history=gru) trained the same model, to the last digit, without a word."""
    with pytest.raises(ConfigError) as e:
        load_config(None, ["model.user.seq_block=sasrec"])
    assert str(e.value) == ("overrides: 'model.user.seq_block=sasrec': model.user.seq_block='sasrec': only the transformer history encoder reads seq_block; "
                            "model.user.history=recency would ignore it. Set model.user.history=transformer, or "
                            "model.user.seq_block=pre_ln (the default)")
    example = Path(__file__).resolve().parents[2] / "examples" / "sasrec.toml"
    with pytest.raises(ConfigError, match=r"model\.user\.seq_positions='left': .* model\.user\.history=gru would "
                                          r"ignore it"):
        load_config(example, ["model.user.history=gru"])
    path = tmp_path / "c.toml"
    path.write_text('[model.item]\nseq_positions = "left"\n')
    with pytest.raises(ConfigError, match=r"^config file .*c\.toml: model\.item\.seq_positions='left'"):
        load_config(path)
    assert load_config(example).model.user.seq_positions == "left"  # read by the transformer: kept
    assert load_config(example, ["model.user.history=gru", "model.user.seq_positions=right"]).model.user.history == "gru"
    # a run saved before the refusal loads as it trained (serve, recommend, --resume read its config.json)
    from twotower.pipeline.artifacts import saved_run_config

    data = config_to_dict(load_config(None, ["model.user.history=gru"]))
    data["model"]["user"].update(seq_positions="left", seq_block="sasrec")
    (tmp_path / "config.json").write_text(json.dumps(data))
    user = saved_run_config(tmp_path / "config.json").model.user
    assert (user.history, user.seq_positions, user.seq_block) == ("gru", "right", "pre_ln")


def test_a_run_saved_with_a_switch_it_ignored_still_loads_as_what_it_trained(tmp_path):
    """Runs saved before those switches were refused wrote them to config.json; they trained without them, so they
    load with them off (serve, recommend and --resume read config.json) rather than fail on a refusal."""
    from twotower.pipeline.artifacts import saved_run_config

    data = config_to_dict(load_config(None, ["loss.kind=sampled", "loss.sampled_negatives=64"]))
    data["loss"]["uniform_negatives"] = 512  # as such a run wrote it
    data["train"]["random_windows"] = True
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    cfg = saved_run_config(path)
    assert (cfg.loss.kind, cfg.loss.sampled_negatives, cfg.loss.uniform_negatives) == ("sampled", 64, 0)
    assert cfg.train.random_windows is False
    data["train"].update(random_windows=False, denoise_keep=0.5)  # causal examples, as such a run wrote it
    path.write_text(json.dumps(data))
    assert saved_run_config(path).train.denoise_keep == TrainConfig.denoise_keep
    data["train"].update(examples="both")  # read by these examples: kept
    path.write_text(json.dumps(data))
    assert saved_run_config(path).train.denoise_keep == 0.5
    data["train"].update(examples="causal", denoise_keep=TrainConfig.denoise_keep)
    data["train"].update(device="cuda", precision="bf16")  # trained in float32 on the GPU
    path.write_text(json.dumps(data))
    assert saved_run_config(path).train.precision == "fp32"
    data["train"].update(device="cpu")
    data["loss"].update(kind="bpr", uniform_negatives=0, sampler="popularity")
    path.write_text(json.dumps(data))
    assert saved_run_config(path).loss.sampler == "uniform"
    data["loss"].update(kind="inbatch", uniform_negatives=512, sampler="uniform")  # read by this kind: kept
    path.write_text(json.dumps(data))
    assert saved_run_config(path).loss.uniform_negatives == 512


def test_bf16_on_a_gpu_is_refused_at_config_load():
    """train.precision=bf16 is CPU autocast: with train.device=cuda the run trained in float32 and its start-up
    log, which names bf16 only when it applies, said nothing of the setting it dropped."""
    for device in ("cuda", "cuda:1"):
        with pytest.raises(ConfigError) as e:
            load_config(None, [f"train.device={device}", "train.precision=bf16"])
        assert str(e.value) == (f"overrides: 'train.device={device}', 'train.precision=bf16': "
                                f"train.precision: bf16 multiplies in bfloat16 on the CPU only (CPU autocast); "
                                f"train.device={device} would train in float32. Set train.precision=fp32 (or auto), "
                                "or train.device=cpu")
    assert load_config(None, ["train.device=cuda", "train.precision=auto"]).train.precision == "auto"
    assert load_config(None, ["train.precision=bf16"]).train.device == "cpu"


def test_refreshing_hard_negatives_that_are_not_used_is_refused():
    """FinetuneConfig(refresh_negatives=True, negatives_per_query=0) was accepted and re-mined nothing (finetune
    skips the refresh when no negative is used), with no word of it."""
    from twotower.config import FinetuneConfig

    with pytest.raises(ConfigError) as e:
        FinetuneConfig(refresh_negatives=True, negatives_per_query=0)
    assert str(e.value) == ("FinetuneConfig.refresh_negatives: True re-mines the hard negatives, and "
                            "FinetuneConfig.negatives_per_query=0 uses none; set negatives_per_query >= 1, or "
                            "refresh_negatives=False")
    assert FinetuneConfig(refresh_negatives=True, negatives_per_query=1).refresh_negatives
    with pytest.raises(ConfigError, match="already scores every document"):  # the corpus softmax's own message
        FinetuneConfig(corpus_negatives=True, train_doc_tower=False, refresh_negatives=True, negatives_per_query=0)


def test_item_normalize_false_beside_the_dual_head_is_refused_not_ignored(tmp_path):
    """The dual head mixes two unit vectors and normalises the mixture: model.item.normalize=false beside
    model.item.dual_head=true trained the same model (MovieLens-100K, one epoch: loss 14.8805 both ways) without a
    word. It is refused; a run saved with it before loads as it trained."""
    with pytest.raises(ConfigError) as e:
        load_config(None, ["model.item.dual_head=true", "model.item.normalize=false"])
    assert str(e.value).startswith("overrides: 'model.item.dual_head=true', 'model.item.normalize=false': "
                                   "model.item.normalize: false: the dual-head item tower always outputs unit vectors")
    assert "Set model.item.normalize=true, or model.item.dual_head=false" in str(e.value)
    assert load_config(None, ["model.item.normalize=false"]).model.item.normalize is False  # read without the dual head
    assert load_config(None, ["model.item.dual_head=true", "model.user.normalize=false"]).model.user.normalize is False
    from twotower.pipeline.artifacts import saved_run_config

    data = config_to_dict(load_config(None, ["model.item.dual_head=true"]))
    data["model"]["item"]["normalize"] = False  # as such a run wrote it
    (tmp_path / "config.json").write_text(json.dumps(data))
    item = saved_run_config(tmp_path / "config.json").model.item
    assert (item.dual_head, item.normalize) == (True, True)


def test_a_malformed_override_names_where_it_was_written(tmp_path, capsys):
    """`train.epochs` (no value) said "override 'train.epochs' must look like ..." where every other refusal of
    the command line's settings begins "command line:" (and Python's, "overrides:")."""
    from twotower.cli.main import main

    assert main(["train", "--train", str(tmp_path / "t.csv"), "--out", str(tmp_path / "r"), "train.epochs"]) == 2
    assert capsys.readouterr().err.startswith("error: command line: 'train.epochs' must look like section.key=value")
    with pytest.raises(ConfigError, match=r"^overrides: '\.epochs=3': empty name part"):
        load_config(overrides=[".epochs=3"])


def test_yaml_numbers_with_a_dot_and_an_unsigned_exponent_are_numbers(tmp_path):
    """`weight_decay: 5.0e2` was read as the text '5.0e2' (YAML 1.1 wants a signed exponent after a dot) and refused
    as a quoted number the user never quoted; TOML and JSON read it as 500."""
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  lr: 2.0e-3\n  weight_decay: 5.0e2\nmodel:\n  item_item:\n    lambdas: [1.0e3, .5e2, 1e3]\n")
    cfg = load_config(p)
    assert (cfg.train.lr, cfg.train.weight_decay, cfg.model.item_item.lambdas) == (0.002, 500.0, (1000.0, 50.0, 1000.0))


@pytest.mark.parametrize(("suffix", "text", "got"), [
    (".yaml", "data:\n  title_col: 1e3\n", "1000.0"),
    (".yaml", "data:\n  item_key: 0123\n", "83"),  # YAML 1.1's octal
    (".toml", "[data]\ntitle_col = 2024\n", "2024"),
])
def test_a_number_for_a_text_setting_is_refused_not_made_a_column_name(tmp_path, suffix, text, got):
    """`title_col: 1e3` named a column '1000.0' and YAML's `item_key: 0123` a column '83', without a word (a boolean
    was refused; an override keeps the text typed)."""
    p = tmp_path / f"c{suffix}"
    p.write_text(text)
    with pytest.raises(ConfigError, match=rf"expected a string, got the number {got}; write it in quotes"):
        load_config(p)
    p.write_text(text.replace(": 1e3", ': "1e3"').replace(": 0123", ': "0123"').replace("= 2024", '= "2024"'))
    cfg = load_config(p)
    assert (cfg.data.title_col or cfg.data.item_key) in ("1e3", "0123", "2024")


@pytest.mark.parametrize(("text", "said"), [
    ("data:\n  multi_separator: |\n", "data.multi_separator: must be a non-empty string; in YAML a value starting with #, "
                                      "|, >, & or * is read as syntax"),
    ("data:\n  multi_separator: #\n", "data.multi_separator: expected a string, got null; in YAML a value starting"),
    ("train:\n#  epochs: 3\nloss:\n  kind: full\n", "train: expected a section (table), got null: a section with no "
                                                    "settings under it; give it settings, or remove the line"),
])
def test_yaml_syntax_read_as_a_value_is_explained(tmp_path, text, said):
    """`multi_separator: |` (an empty YAML block) and `: #` (a comment) were refused with no word of quotes, and a
    section whose keys are all commented out as "got None", a Python word."""
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert said in str(e.value)
    assert "in YAML" not in str(e.value) or "section" not in said


def test_a_bracketed_list_of_bare_words_on_the_command_line_is_a_list():
    """`eval.baselines=[popularity]` (the quotes JSON wants are the ones a shell strips) was the one string
    '[popularity]', refused as "not one of popularity, ease, itemknn; did you mean 'popularity'?"."""
    cfg = load_config(overrides=["eval.baselines=[popularity, 'ease']", "data.item_multi=[genres]", "eval.ks=[5,10]"])
    assert cfg.eval.baselines == ("popularity", "ease") and cfg.data.item_multi == ("genres",)
    assert cfg.eval.ks == (5, 10)
    assert load_config(overrides=['eval.baselines=["popularity"]']).eval.baselines == ("popularity",)  # JSON as before


@pytest.mark.parametrize("metric", ["MeanPop@10", "Coverage@20"])
def test_a_select_metric_that_describes_the_lists_is_refused(metric):
    # MeanPop@10 kept the epoch with the most popular lists as "(new best)", and the item-item term's tuning refused
    # it only after the whole training, leaving an unsealed run
    with pytest.raises(ConfigError, match=rf"^overrides: 'eval\.select_metric={metric}': eval\.select_metric: selects "
                                          r"on how well the lists hit the held-out items: one of \['Recall'"):
        load_config(overrides=[f"eval.select_metric={metric}"])


def test_a_select_metric_k_above_the_eval_ks_bound_is_refused():
    # NDCG@100000 was accepted where eval.ks=[100000] is refused: its lists are padded to k alike
    with pytest.raises(ConfigError, match=r"^overrides: 'eval\.select_metric=NDCG@100000': eval\.select_metric: k "
                                          r"must be at most 10000 \(as eval\.ks\), got NDCG@100000"):
        load_config(overrides=["eval.select_metric=NDCG@100000"])
    assert load_config(overrides=["eval.select_metric=NDCG@10000"]).eval.select_metric == "NDCG@10000"


def test_a_misspelt_select_metric_lists_only_the_metrics_that_can_select():
    # the list named Coverage and MeanPop, and following it, eval.select_metric=Coverage@10 was then refused as a
    # metric that cannot select
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["eval.select_metric=ndcg@10"])
    said = str(e.value)
    assert "with NAME in ['HitRate', 'MRR', 'NDCG', 'Precision', 'Recall']" in said
    assert "Coverage" not in said and "MeanPop" not in said
    assert "did you mean 'NDCG@10'?" in said
