"""Training from DataFrames (``train_run(cfg, out, frames={...})``): read like the same data in files."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from twotower.config import load_config
from twotower.errors import ConfigError, DataError
from twotower.pipeline.run import prepare_data, train_run

FAST = ["train.epochs=2", "train.progress=false", "train.checkpoint=false", "train.threads=1", "train.batch_size=64",
        "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16", "model.item.out_dim=16",
        "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=6", "eval.baselines=[]"]


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    rows = [(f"u{u}", f"i{int(rng.integers(40))}", t) for u in range(60) for t in range(8)]
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).drop_duplicates(["user_id", "item_id"])
    last = df.groupby("user_id")["timestamp"].transform("max")
    return {"train": df[df.timestamp < last].reset_index(drop=True), "valid": df[df.timestamp == last].reset_index(drop=True)}


def test_frames_train_the_same_model_as_the_same_data_in_files(frames, tmp_path):
    paths = {}
    for name, df in frames.items():
        paths[name] = tmp_path / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    from_files = load_config(overrides=[*FAST, f"data.train={json.dumps(str(paths['train']))}",
                                        f"data.valid={json.dumps(str(paths['valid']))}"])
    _, by_file, _ = train_run(from_files, tmp_path / "files")
    run, by_frame, _ = train_run(load_config(overrides=FAST), tmp_path / "frames", frames=frames)
    assert [r["loss"] for r in by_frame.history] == [r["loss"] for r in by_file.history]
    assert by_frame.best_metric == by_file.best_metric
    # the run folder keeps the frames like files, and its config names no file
    assert (run.dir / "data" / "train.csv").read_text() == (tmp_path / "files" / "data" / "train.csv").read_text()
    assert json.loads((run.dir / "config.json").read_text())["data"]["train"] is None


def test_a_dataframe_in_the_config_is_refused_with_the_way_to_pass_it(frames):
    cfg = load_config(overrides=FAST)
    with pytest.raises(ConfigError, match=r"data.train: expected a file path, got DataFrame.*frames=\{'train': df\}"):
        dataclasses.replace(cfg.data, train=frames["train"])


def test_frames_are_checked_like_files(frames, tmp_path):
    cfg = load_config(overrides=FAST)
    with pytest.raises(ConfigError, match="unknown input.*'trian'"):
        train_run(cfg, tmp_path / "a", frames={"trian": frames["train"]})
    bad = frames["train"].rename(columns={"item_id": "iid"})
    with pytest.raises(DataError, match=r"<DataFrame train>.*'item_id'.*did you mean 'iid'"):
        train_run(cfg, tmp_path / "b", frames={"train": bad, "valid": frames["valid"]})
    assert not (tmp_path / "b").exists()  # refused before anything was written


def test_training_without_validation_data_says_so_from_python_too(frames, caplog):
    from twotower.pipeline.run import prepare_data

    # only `twotower train` used to warn; train_run(frames={"train": df}) early-stopped on the loss silently
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        prepare_data(load_config(overrides=FAST), frames={"train": frames["train"]})
    assert "no validation data" in caplog.text and "falls back to the training loss" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        prepare_data(load_config(overrides=FAST), frames=frames)
    assert "no validation data" not in caplog.text


@pytest.mark.parametrize("given", ["frame", "list"])
def test_frames_that_are_not_a_mapping_are_refused_with_the_form_to_use(frames, tmp_path, given):
    # train_run(cfg, out, frames=df) failed inside pandas: "The truth value of a DataFrame is ambiguous"
    value = frames["train"] if given == "frame" else [frames["train"]]
    with pytest.raises(ConfigError, match=r"frames must map input names to DataFrames, e.g. frames=\{'path': df\}"):
        train_run(load_config(overrides=FAST), tmp_path / "run", frames=value)
    assert not (tmp_path / "run").exists()


def test_an_out_that_is_a_file_is_refused_before_the_data_is_read(frames, tmp_path, monkeypatch):
    # `twotower train --out FILE` said so in one line; train_run(cfg, FILE) raised FileExistsError after training set up
    import twotower.pipeline.run as run_module

    monkeypatch.setattr(run_module, "prepare_data", lambda *a, **k: pytest.fail("data read before out was checked"))
    (tmp_path / "taken").write_text("not a run folder")
    with pytest.raises(ConfigError, match=r"out .*taken: exists and is a file, not a folder"):
        train_run(load_config(overrides=FAST), tmp_path / "taken", frames=frames)
    assert (tmp_path / "taken").read_text() == "not a run folder"


def test_dropped_duplicate_rows_are_counted_in_the_report(frames):
    from twotower.pipeline.run import prepare_data

    # "exact duplicate rows are dropped and counted": the count was only an INFO log line, never in prep.report
    train = frames["train"].assign(rating=1.0)
    repeated = pd.concat([train, train.iloc[:3], train.iloc[[5]].assign(rating=4.0)], ignore_index=True)
    prep = prepare_data(load_config(overrides=FAST), frames={"train": repeated, "valid": frames["valid"]})
    assert prep.report["read"]["train"] == {"rows_read": len(train) + 4, "rows": len(train), "duplicates_dropped": 3,
                                            "conflicting_duplicates_dropped": 1}
    assert prep.report["read"]["valid"]["duplicates_dropped"] == 0
    json.dumps(prep.report)  # saved in run.json


def test_validation_within_train_warning_names_the_frames(frames, caplog):
    from twotower.pipeline.run import prepare_data

    # from Python the warning read "... is also in the training split of None"
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        prepare_data(load_config(overrides=FAST), frames={"train": frames["train"], "valid": frames["train"]})
    said = [r.getMessage() for r in caplog.records if "is also in" in r.getMessage()]
    assert len(said) == 1 and "in frames['valid'] is also in frames['train']" in said[0] and "None" not in said[0]


@pytest.mark.parametrize(("config", "hint"), [
    ("examples/run.toml", r"read the file first: cfg = tt\.load_config\('examples/run\.toml'\)"),
    ({"train": {"epochs": 1}}, r"make one from the settings: cfg = tt\.load_config\(base=settings\)"),
    (None, r"make one with tt\.load_config\(\) \(the defaults\)"),
])
def test_a_config_that_is_not_a_run_config_is_named_with_the_way_to_one(config, hint, frames, tmp_path):
    # a TOML path, a settings dict or None failed with "AttributeError: 'str' object has no attribute 'data'"
    # (prepare_data: '... no attribute model'), naming neither the argument nor load_config
    kind = type(config).__name__
    with pytest.raises(ConfigError, match=rf"^train_run: config must be a RunConfig, got a {kind}; {hint}"):
        train_run(config, tmp_path / "run", frames=frames)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match=rf"^prepare_data: config must be a RunConfig, got a {kind}; {hint}"):
        prepare_data(config, frames=frames)


@pytest.fixture
def frames_run(frames, tmp_path):
    """A 1-epoch run trained from DataFrames, its checkpoint kept, with an item table (a numeric feature) as a
    DataFrame too; and the item table."""
    items = pd.DataFrame({"item_id": [f"i{n}" for n in range(40)], "year": [1990.0 + n % 7 for n in range(40)]})
    cfg = load_config(overrides=[*FAST, "train.epochs=1", "train.checkpoint=true", 'data.item_numeric=["year"]'])
    run, _, _ = train_run(cfg, tmp_path / "run", frames={**frames, "items": items})
    return run, items


def _epochs(out) -> int:
    return json.loads((out / "checkpoint" / "state.json").read_text())["epoch"]


def test_a_run_trained_from_frames_resumes_from_its_own_copies(frames_run, frames) -> None:
    # its config names no data (a DataFrame has no file name): train_run(run.config, out, resume=True) was refused
    # with "no data: give data.train ...", though the run folder keeps its interactions as data/*.csv
    run, items = frames_run
    two = dataclasses.replace(run.config, train=dataclasses.replace(run.config.train, epochs=2))
    with pytest.raises(ConfigError) as e:
        train_run(two, run.dir, resume=True)
    said = str(e.value)
    assert said.startswith(f"cannot resume {run.dir}: it was trained from DataFrames") and "--items" not in said
    assert f"tt.train_run(config, {str(run.dir)!r}, resume=True, frames={{'items': items_df}})" in said
    assert _epochs(run.dir) == 1  # refused before anything was rewritten
    resumed, _, _ = train_run(two, run.dir, resume=True, frames={"items": items})  # the table alone, given again
    assert _epochs(run.dir) == 2 and resumed.config.data.train is None  # the run's config still names no file
    again = dataclasses.replace(two, train=dataclasses.replace(two.train, epochs=3))
    train_run(again, run.dir, resume=True, frames={**frames, "items": items})  # every frame given again, as before
    assert _epochs(run.dir) == 3


def test_a_run_trained_from_frames_resumes_from_the_command_line(frames_run, tmp_path, capsys) -> None:
    from twotower.cli.main import main

    run, items = frames_run
    resume = ["-q", "train", "--out", str(run.dir), "--resume", "--epochs", "2", "train.threads=1", "--no-progress"]
    assert main(resume) == 2  # "error: no training data: pass --train FILE ..." sent the user to start another run
    err = capsys.readouterr().err
    assert f"error: cannot resume {run.dir}: it was trained from DataFrames" in err and "no training data" not in err
    assert (f"tt.train_run(tt.load_config({str(run.dir / 'config.json')!r}), {str(run.dir)!r}, resume=True, "
            "frames={'items': items_df}), or write it to a file and pass --items FILE") in err
    items.to_csv(tmp_path / "items.csv", index=False)
    assert main([*resume, "--items", str(tmp_path / "items.csv")]) == 0
    assert _epochs(run.dir) == 2


def test_a_run_trained_from_frames_alone_resumes_from_the_command_line(frames, tmp_path) -> None:
    from twotower.cli.main import main

    run, _, _ = train_run(load_config(overrides=[*FAST, "train.epochs=1", "train.checkpoint=true"]), tmp_path / "run",
                          frames=frames)
    assert main(["-q", "train", "--out", str(run.dir), "--resume", "--epochs", "2", "--no-progress"]) == 0
    assert _epochs(run.dir) == 2


def test_a_frames_run_without_its_copy_of_the_split_names_the_frames(frames_run, capsys) -> None:
    from twotower.cli.main import main

    run, _ = frames_run
    (run.dir / "data" / "valid.csv").unlink()
    # "pass the files it was trained on (--train FILE --valid FILE, or --data FILE)": it was given none
    assert main(["-q", "train", "--out", str(run.dir), "--resume", "--epochs", "2", "--no-progress"]) == 2
    assert (f"copy of the valid interactions, {run.dir / 'data' / 'valid.csv'}, is missing; it was trained from "
            f"DataFrames: pass them again, tt.train_run(config, {str(run.dir)!r}, resume=True, "
            "frames={'train': train_df, 'valid': valid_df}) to resume") in capsys.readouterr().err
