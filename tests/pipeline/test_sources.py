"""load_sources: a validation or test input is read, or refused; never silently replaced by a split."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from twotower.config import DataConfig, load_config
from twotower.errors import ConfigError, DataError
from twotower.pipeline.sources import load_sources


@pytest.fixture()
def files(tmp_path):
    rows = [(f"u{u}", f"i{(u * 7 + t) % 30}", t) for u in range(20) for t in range(6)]
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])
    df.to_csv(tmp_path / "all.csv", index=False)
    df.iloc[:5].to_csv(tmp_path / "valid.csv", index=False)
    return tmp_path


@pytest.mark.parametrize("name", ["valid", "test"])
def test_a_held_out_file_beside_a_file_to_split_is_refused(files, name):
    # `twotower train --data all.csv --valid valid.csv` used to train and select on the split's own valid rows
    cfg = load_config(overrides=[f"data.path={json.dumps(str(files / 'all.csv'))}",
                                 f"data.{name}={json.dumps(str(files / 'valid.csv'))}"]).data
    # each named by where it was given (overrides here; they were named by the flags --valid and --data, a guess)
    with pytest.raises(ConfigError, match=rf"data.{name} \(.*valid.csv, override\) is read only beside data.train "
                                          rf"\(--train\): with data.path \(.*all.csv, override\) the {name} split is "
                                          "cut from it"):
        load_sources(cfg)


def test_a_held_out_frame_beside_a_frame_to_split_is_refused(files):
    df = pd.read_csv(files / "all.csv")
    with pytest.raises(ConfigError, match=r"frames\['valid'\] is read only beside data.train"):
        load_sources(load_config().data, frames={"path": df, "valid": df.iloc[:5]})


def test_train_and_valid_files_are_still_read(files):
    cfg = load_config(overrides=[f"data.train={json.dumps(str(files / 'all.csv'))}",
                                 f"data.valid={json.dumps(str(files / 'valid.csv'))}"]).data
    src = load_sources(cfg)
    assert (len(src.train), len(src.valid)) == (120, 5)


def test_a_feature_table_with_no_feature_column_named_is_warned_about(files, caplog):
    # `twotower train --items items.csv` without data.item_multi=... trained an item tower blind to the table
    pd.DataFrame({"item_id": [f"i{i}" for i in range(30)], "title": [f"T{i}" for i in range(30)],
                  "genres": ["a|b"] * 30}).to_csv(files / "items.csv", index=False)
    pd.DataFrame({"user_id": [f"u{u}" for u in range(20)], "age": range(20)}).to_csv(files / "users.csv", index=False)
    base = [f"data.path={json.dumps(str(files / 'all.csv'))}", f"data.items={json.dumps(str(files / 'items.csv'))}",
            f"data.users={json.dumps(str(files / 'users.csv'))}"]
    with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
        load_sources(load_config(overrides=base).data)
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("data.items: no feature column is named") and "(title, genres)" in m
               and "titles, metadata and catalogue only" in m for m in said), said
    assert any(m.startswith("data.users: no feature column is named") and "(age)" in m for m in said), said
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
        load_sources(load_config(overrides=[*base, 'data.item_multi=["genres"]', 'data.user_numeric=["age"]']).data)
    assert not [r for r in caplog.records if "no feature column" in r.getMessage()]
    caplog.clear()
    # titles embedded by MiniLM are read: the warning said the tower read "none" of the columns
    for title in (["data.title_col=title"], []):  # data.title_col unset: the "title" column is embedded all the same
        caplog.clear()
        with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
            load_sources(load_config(overrides=[*base, *title]).data, embeds_titles=True)
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("data.items: no feature column")]
        assert len(said) == 1 and "so the item tower reads only the text of 'title' (model.item.text_embeddings) of " \
            f"{files / 'items.csv'}'s columns (title, genres); the table is otherwise used for titles, metadata and " \
            "catalogue only" in said[0], said


def test_a_second_training_input_is_named_as_not_read(files, caplog):
    # `twotower train --train all.csv --data other.csv` trained on all.csv and never mentioned other.csv
    cfg = load_config(overrides=[f"data.train={json.dumps(str(files / 'all.csv'))}",
                                 f"data.path={json.dumps(str(files / 'valid.csv'))}",
                                 "data.dataset=movielens-100k"]).data
    with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
        src = load_sources(cfg)
    assert len(src.train) == 120  # data.train is read, as before
    said = " ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    # each named by where it was given: overrides here (the flags --train, --data and --dataset were named, a guess
    # that misled the user of a config file or an override); a DataConfig built in Python names the values alone
    assert "data.train (" in said and "all.csv, override) is the training input" in said
    assert "valid.csv, override) and data.dataset (movielens-100k, override) are not read" in said
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
        load_sources(DataConfig(train=cfg.train, path=cfg.path))
    assert f"data.train ({cfg.train}) is the training input; data.path ({cfg.path}) is not read" in caplog.text


def test_one_training_input_gives_no_such_warning(files, caplog):
    cfg = load_config(overrides=[f"data.path={json.dumps(str(files / 'all.csv'))}"]).data
    with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
        load_sources(cfg)
    assert "training input" not in caplog.text


def test_a_misnamed_title_column_lists_the_item_files_own_columns(files):
    # the list named the table's key 'item_id' (its name after reading), not the file's 'sku'
    pd.DataFrame({"sku": [f"i{i}" for i in range(30)], "name": [f"T{i}" for i in range(30)],
                  "genres": ["a|b"] * 30}).to_csv(files / "items.csv", index=False)
    cfg = load_config(overrides=[f"data.path={json.dumps(str(files / 'all.csv'))}",
                                 f"data.items={json.dumps(str(files / 'items.csv'))}", "data.item_key=sku",
                                 'data.item_multi=["genres"]', "data.title_col=nam"]).data
    with pytest.raises(DataError, match=r"column 'nam' \(the title column\) not found; columns present: "
                                        r"\['sku', 'name', 'genres'\]; did you mean 'name'\?"):
        load_sources(cfg)


def test_title_col_none_on_the_dataset_names_its_table_and_null(tmp_path, monkeypatch):
    # the message said "file None" (the dataset's item table has no file of the user's), and "none" read as a
    # column name without a word that null is how to say "no title column"
    from tests.data.test_movielens import write_recbole
    from twotower.data import movielens

    write_recbole(tmp_path / "ml")
    monkeypatch.setattr(movielens, "fetch_movielens_100k", lambda *a, **k: tmp_path / "ml")
    cfg = load_config(overrides=["data.dataset=movielens-100k", "data.title_col=none"]).data
    with pytest.raises(DataError) as err:
        load_sources(cfg)
    said = str(err.value)
    assert said.startswith("file the movielens-100k item table, column 'none': ")
    assert "file None" not in said
    assert 'data.title_col=null means no title column ("none" names a column called none)' in said


@pytest.mark.parametrize(("overrides", "said"), [
    (["data.valid_start=2024-05-01", "data.test_start=2024-06-01"],
     "data.valid_start is read by data.split=time, not by data.split=temporal (the default), which would ignore "
     "it: set data.split=time for it, or leave data.valid_start out"),
    (["data.split=random", "data.leave_n=2"],
     "data.leave_n is read by data.split=leave_last, not by data.split=random, which would ignore it: set "
     "data.split=leave_last for it, or leave data.leave_n out"),
    (["data.split=leave_last", "data.ratios=[0.6,0.2,0.2]"],
     "data.ratios is read by data.split=temporal and random, not by data.split=leave_last, which would ignore it: "
     "set data.split=temporal or random for it, or leave data.ratios out"),
])
def test_a_split_setting_of_another_method_is_refused_not_ignored(files, overrides, said):
    """Before: `train --data FILE data.valid_start=... data.test_start=...` without data.split=time made the
    default temporal split without a word; `data split` refuses the same as flags."""
    cfg = load_config(overrides=[f"data.path={files / 'all.csv'}", *overrides]).data
    with pytest.raises(ConfigError) as e:
        load_sources(cfg)
    assert str(e.value) == said
    # the settings a method reads, and every setting beside given files (no split is made), are read as before
    load_sources(load_config(overrides=[f"data.path={files / 'all.csv'}", "data.split=leave_last",
                                        "data.leave_n=2", "data.ratios=[0.8,0.1,0.1]"]).data)
    load_sources(load_config(overrides=[f"data.train={files / 'all.csv'}", *overrides]).data)


def test_a_split_setting_typed_at_its_default_is_refused_from_the_command_line(files, capsys):
    # `train --data FILE data.leave_n=1` asked for leave-one-out and got the default temporal 80/10/10 split without
    # a word, while data.leave_n=2 was refused: 1 is the default, so the typed value looked like no value
    from twotower.cli.main import main

    assert main(["train", "--data", str(files / "all.csv"), "data.leave_n=1", "--print-config"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "error: data.leave_n is read by data.split=leave_last, not by data.split=temporal (the default), which would "
        "ignore it: set data.split=leave_last for it, or leave data.leave_n out")
    assert main(["train", "--data", str(files / "all.csv"), "data.split=leave_last", "data.leave_n=1",
                 "--print-config"]) == 0


@pytest.mark.parametrize(("settings", "said"), [
    (["data.leave_n=3"], "error: data.leave_n is read by data.split=leave_last, not by data.split=temporal"),
    (["data.split=leave_last", "data.ratios=[0.6,0.2,0.2]"], "error: data.ratios is read by data.split=temporal and "
                                                              "random, not by data.split=leave_last"),
    (["data.split=time"], "error: data.split='time' needs data.valid_start and data.test_start"),
])
def test_print_config_without_data_refuses_split_settings_the_run_would_refuse(settings, said, capsys):
    """`--print-config` is the check of a config before a long run: without data it printed these and exited 0, and
    the run given data then refused them."""
    from twotower.cli.main import main

    assert main(["train", *settings, "--print-config"]) == 2
    assert said in capsys.readouterr().err
    assert main(["train", "--train", "t.csv", *settings, "--print-config"]) == 0  # split files: no split is made


def test_column_settings_beside_the_built_in_dataset_are_said_to_be_ignored(caplog):
    """`--dataset movielens-100k data.user_col=customer data.rating_col=stars` read the dataset's own columns without
    a word (its feature-table settings were warned about already)."""
    from twotower.pipeline.sources import _check_feature_tables

    with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
        _check_feature_tables(DataConfig(dataset="movielens-100k", user_col="customer", rating_col="stars"))
    assert ("data.user_col=customer, data.rating_col=stars ignored: the movielens-100k dataset is read with its own "
            "columns") in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.sources"):
        _check_feature_tables(DataConfig(dataset="movielens-100k"))
        _check_feature_tables(DataConfig(path="x.csv", user_col="customer"))
    assert "ignored" not in caplog.text


def test_item_item_settings_beside_the_term_switched_off_are_said_to_have_no_effect(caplog):
    """`model.item_item.enabled=false model.item_item.lambdas=[5]` trained without a word about the lambdas."""
    from twotower.pipeline.run import warn_unread_settings

    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        warn_unread_settings(load_config(overrides=["model.item_item.enabled=false", "model.item_item.lambdas=[5]"]))
    assert "model.item_item.lambdas has no effect: model.item_item.enabled=false fits no item-item term" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        warn_unread_settings(load_config(overrides=["model.item_item.enabled=false"]))
        warn_unread_settings(load_config(overrides=["model.item_item.lambdas=[5]"]))
    assert "no effect" not in caplog.text


def test_a_tie_of_item_embeddings_that_cannot_be_made_is_said(caplog):
    """model.share_item_embeddings=true (written out in examples/sasrec.toml) was dropped without a word where the
    item tower's ID table is not at the history's width, or absent: the user tower learned its own table."""
    from twotower.pipeline.run import warn_unread_settings

    for overrides, why in ((["model.item.id_dim=16"], "model.item.id_dim 16 is not model.user.history_dim 64"),
                           (["model.item.use_id=false"], "model.item.use_id=false leaves the item tower no ID table")):
        caplog.clear()
        with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
            warn_unread_settings(load_config(overrides=["model.user.history=gru", *overrides]))
        assert f"model.share_item_embeddings=true ties nothing: {why}" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        warn_unread_settings(load_config(overrides=["model.user.history=gru"]))  # one width: tied
        warn_unread_settings(load_config(overrides=["model.item.id_dim=16"]))  # a pooled tower ties nothing anyway
        warn_unread_settings(load_config(overrides=["model.user.history=gru", "model.item.id_dim=16",
                                                    "model.share_item_embeddings=false"]))
        warn_unread_settings(load_config("examples/sasrec.toml"))
    assert "ties nothing" not in caplog.text
