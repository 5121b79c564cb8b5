"""`twotower train --out RUN --resume` continues a run with its own settings and data, none retyped.

Evidence: a run trained with `model.*=` overrides and `--train/--valid` was resumed by `train --out RUN --resume
--epochs 2` with "error: no training data: pass --train FILE ..."; given the data again, it was refused as trained
with other model settings (the resume's config was the defaults), naming every override to type again.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main

MODEL = ["model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16", "model.item.out_dim=16",
         "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8"]
OTHER = ["train.batch_size=32", "train.threads=1", "eval.baselines=[]", "data.rating_col=null", "--no-progress"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict[str, Path]:
    return write_dataset(tmp_path_factory.mktemp("data"), n_users=24, per_user=8)


@pytest.fixture
def run(dataset, tmp_path) -> Path:
    """A 1-epoch run of a small model (every model setting away from its default)."""
    out = tmp_path / "run"
    assert main(["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(out),
                 "--epochs", "1", *MODEL, *OTHER]) == 0
    return out


def test_resume_alone_continues_with_the_runs_settings_and_data(run, caplog) -> None:
    before = json.loads((run / "config.json").read_text())
    caplog.set_level("INFO", logger="twotower")
    assert main(["-q", "train", "--out", str(run), "--resume", "--epochs", "2"]) == 0
    state = json.loads((run / "checkpoint" / "state.json").read_text())
    assert [row["epoch"] for row in state["history"]] == [1, 2]
    after = json.loads((run / "config.json").read_text())
    # the model and the data as the run names them (its original files, not the copies it read)
    assert after["model"] == before["model"] and after["data"] == before["data"]
    assert after["train"]["epochs"] == 2
    said = [r.getMessage() for r in caplog.records if "differ from the run's and apply" in r.getMessage()]
    assert said and said[0].endswith("train.epochs: 1 in the run, 2 now")  # settings not given are not changes


def test_a_model_setting_given_that_differs_is_still_refused(run, capsys) -> None:
    assert main(["-q", "train", "--out", str(run), "--resume", "--epochs", "2", "model.user.hidden=[32]"]) == 2
    err = capsys.readouterr().err
    assert "the model settings differ from the run's (model.user.hidden: [16] in the run, [32] now); add " \
           "model.user.hidden=[16] to resume" in err
    assert "model.item.hidden" not in err  # the settings not given are the run's


def test_a_run_without_its_data_copies_says_which_file_and_what_to_pass(run, capsys) -> None:
    (run / "data" / "valid.csv").unlink()
    assert main(["-q", "train", "--out", str(run), "--resume", "--epochs", "2"]) == 2
    err = capsys.readouterr().err
    assert f"its copy of the valid interactions, {run / 'data' / 'valid.csv'}, is missing" in err
    assert "--train FILE --valid FILE" in err
    assert json.loads((run / "checkpoint" / "state.json").read_text())["epoch"] == 1  # the run is left as it was


def test_the_python_api_resumes_with_resume_config(run) -> None:
    from twotower.pipeline import resume_config, train_run

    cfg = resume_config(run, ["train.epochs=2"])
    assert cfg.model.user.hidden == (16,) and cfg.data.train == str(run / "data" / "train.csv")
    train_run(cfg, run, resume=True)
    assert json.loads((run / "checkpoint" / "state.json").read_text())["epoch"] == 2


def test_a_data_file_changed_since_the_run_was_trained_is_named_on_resume(dataset, tmp_path, caplog) -> None:
    # an edited test file was read as it is now without a word, and run.json's input_sha256 rewritten
    import hashlib
    import shutil

    files = {name: shutil.copy(dataset[name], tmp_path / f"{name}.csv") for name in ("train", "valid", "test")}
    out = tmp_path / "run"
    argv = ["-q", "train", *(a for name, path in files.items() for a in (f"--{name}", str(path))), "--out", str(out),
            *MODEL, *OTHER]
    assert main([*argv, "--epochs", "1", "--no-eval"]) == 0
    was = hashlib.sha256(Path(files["test"]).read_bytes()).hexdigest()
    caplog.set_level("INFO", logger="twotower")
    assert main([*argv, "--epochs", "2", "--no-eval", "--resume"]) == 0
    assert not [r for r in caplog.records if "not the file the run was trained with" in r.getMessage()]
    lines = Path(files["test"]).read_text().splitlines()
    Path(files["test"]).write_text("\n".join(lines[:-3]) + "\n")  # three held-out rows fewer
    now = hashlib.sha256(Path(files["test"]).read_bytes()).hexdigest()
    caplog.clear()
    assert main([*argv, "--epochs", "3", "--no-eval", "--resume"]) == 0
    said = [r for r in caplog.records if "not the file the run was trained with" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"
    assert said[0].getMessage().startswith(f"resume: --test {files['test']} is not the file the run was trained with "
                                           f"(sha256 {was[:12]}... then, {now[:12]}... now)")


def test_a_train_file_given_on_resume_replaces_the_train_file_alone(dataset, run, caplog) -> None:
    # `--resume --train T` (the very file the run was trained on) dropped the run's --valid: a warning of no
    # validation data, then a refusal as trained with other valid interactions
    caplog.set_level("INFO", logger="twotower")
    assert main(["-q", "train", "--out", str(run), "--resume", "--epochs", "2", "--train", str(dataset["train"])]) == 0
    assert json.loads((run / "checkpoint" / "state.json").read_text())["epoch"] == 2
    data = json.loads((run / "config.json").read_text())["data"]
    assert data["train"] == str(dataset["train"]) and data["valid"] == str(dataset["valid"])
    assert not [r for r in caplog.records if "no validation data" in r.getMessage()]


def test_a_file_or_dataset_to_split_given_on_resume_names_the_whole_split_afresh(dataset, run) -> None:
    # --data and --dataset cut their own valid and test: the run's files would be read beside them (its train
    # file in place of the one given, as data.train is read first)
    from twotower.pipeline import resume_config

    for flag, value in (("path", str(dataset["all"])), ("dataset", "movielens-100k")):
        data = resume_config(run, [f"data.{flag}={value}"]).data
        assert (data.train, data.valid, data.test, getattr(data, flag)) == (None, None, None, value)
    data = resume_config(run, [f"data.train={dataset['train']}", f"data.items={dataset['items']}"]).data
    assert (data.valid, data.items, data.path, data.dataset) == (str(dataset["valid"]), str(dataset["items"]), None, None)


def test_a_resume_with_another_select_metric_says_so_and_compares_like_with_like(run, caplog, capsys) -> None:
    """eval.select_metric=Recall@20 on resume: the change was not among the settings said to apply, the resume line
    named the run's NDCG@10 "best Recall@20", and the resumed epochs were compared with that NDCG@10."""
    caplog.set_level("INFO", logger="twotower")
    assert main(["train", "--out", str(run), "--resume", "--epochs", "2", "eval.select_metric=Recall@20",
                 "--no-eval"]) == 0
    said = [r.getMessage() for r in caplog.records if "differ from the run's and apply" in r.getMessage()]
    assert said and "eval.select_metric: 'NDCG@10' in the run, 'Recall@20' now" in said[0]
    first = json.loads((run / "log.jsonl").read_text().splitlines()[0])
    assert f"resumed from epoch 1 (best NDCG@10={first['valid_NDCG@10']:.4f} at epoch 1)" in caplog.text
    assert [m for r in caplog.records if (m := r.getMessage()).startswith("resume: validation measures otherwise")]
    state = json.loads((run / "checkpoint" / "state.json").read_text())
    # the best is a Recall@20 of either epoch, as the summary names it
    rows = {row["epoch"]: row["valid_Recall@20"] for row in state["history"]}
    assert state["best"] == pytest.approx(rows[state["best_epoch"]]) and state["best"] == pytest.approx(max(rows.values()))
    assert f"trained: best valid Recall@20 {state['best']:.4f} at epoch {state['best_epoch']}" in capsys.readouterr().out


def test_a_checkpoint_saved_before_it_recorded_its_measure_reads_the_runs_config(run, caplog) -> None:
    """Checkpoints written before state.json kept "best_measure": the run's config.json says what measured the best."""
    from twotower.training.checkpoint import _state_digest

    path = run / "checkpoint" / "state.json"
    state = json.loads(path.read_text())
    del state["best_measure"], state["state_sha256"]
    path.write_text(json.dumps({**state, "state_sha256": _state_digest(state)}))
    caplog.set_level("INFO", logger="twotower")
    assert main(["-q", "train", "--out", str(run), "--resume", "--epochs", "2", "eval.select_metric=Recall@20",
                 "--no-eval"]) == 0
    assert "resumed from epoch 1 (best NDCG@10=" in caplog.text
    assert "eval.select_metric: 'NDCG@10' in the run, 'Recall@20' now); its weights scored again" in caplog.text
