"""`twotower train` findings of a user walkthrough: validation equal to train, the summary line without
validation data, and feature columns without their feature table."""
from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8",
        "train.threads=1", "eval.baselines=[]", "data.rating_col=null", "--no-progress", "--no-eval", "--epochs", "1"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict[str, Path]:
    return write_dataset(tmp_path_factory.mktemp("data"), n_users=24, per_user=8)


def _train(dataset: dict[str, Path], out: Path, *extra: str) -> int:
    return main(["-q", "train", "--train", str(dataset["train"]), "--out", str(out), *FAST, *extra])


def test_the_training_file_given_again_as_valid_is_refused(dataset, tmp_path, capsys):
    assert _train(dataset, tmp_path / "r", "--valid", str(dataset["train"])) == 2
    err = capsys.readouterr().err
    assert f"--valid {dataset['train']} is the training file --train {dataset['train']}" in err
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_the_training_file_given_again_in_a_config_file_names_the_file(dataset, tmp_path, capsys):
    """A config file's user typed no --valid: the refusal names the settings and the file that gave them."""
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'[data]\ntrain = "{dataset["train"]}"\nvalid = "{dataset["train"]}"\n')
    assert main(["-q", "train", "--config", str(cfg), "--out", str(tmp_path / "r"), *FAST]) == 2
    err = capsys.readouterr().err
    assert (f"data.valid ({dataset['train']}, config file {cfg}) is the training file "
            f"data.train ({dataset['train']}, config file {cfg}) again") in err, err
    assert "leave data.valid out to stop on the training loss" in err
    assert "--valid" not in err and "--train" not in err


def test_the_training_file_given_again_as_test_is_refused(dataset, tmp_path, capsys):
    assert _train(dataset, tmp_path / "r", "--valid", str(dataset["valid"]), "--test", str(dataset["train"])) == 2
    assert f"--test {dataset['train']} is the training file --train {dataset['train']}" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_validation_rows_all_in_train_get_a_warning_naming_both_files(dataset, tmp_path, caplog):
    copy = tmp_path / "valid_copy.csv"
    shutil.copy(dataset["train"], copy)  # another file, same rows
    with caplog.at_level(logging.WARNING):
        assert _train(dataset, tmp_path / "r", "--valid", str(copy)) == 0
    said = [r.getMessage() for r in caplog.records if "is also in" in r.getMessage()]
    assert len(said) == 1
    assert str(copy) in said[0] and str(dataset["train"]) in said[0] and "nothing is left to find" in said[0]


def test_validation_rows_partly_in_train_get_a_warning_with_the_counts(dataset, tmp_path, caplog):
    """A validation file from another split of the data (a random split's beside a temporal split's train) was
    taken without a word, though most of its pairs could never be hit and early stopping was chosen on it."""
    import pandas as pd

    train, valid = pd.read_csv(dataset["train"]), pd.read_csv(dataset["valid"])
    mixed = tmp_path / "mixed_valid.csv"
    pd.concat([valid, train.head(7)]).to_csv(mixed, index=False)
    pairs = len(pd.concat([valid, train.head(7)])[["user_id", "item_id"]].drop_duplicates())
    with caplog.at_level(logging.WARNING):
        assert _train(dataset, tmp_path / "r", "--valid", str(mixed)) == 0
    said = [r.getMessage() for r in caplog.records if "valid pairs in" in r.getMessage()]
    assert said == [f"7 of {pairs} valid pairs in the validation file {mixed} are in the training file {dataset['train']}, whose items "
                    "validation excludes from ranking, so they are never hit: valid NDCG@10 counts them as misses, and "
                    "early stopping and the item-item weight are chosen on it (is the validation file held out from "
                    "this training file?)"]


def test_a_held_out_valid_file_gets_no_such_warning(dataset, tmp_path, caplog, capsys):
    with caplog.at_level(logging.WARNING):
        assert _train(dataset, tmp_path / "r", "--valid", str(dataset["valid"])) == 0
    assert not [r for r in caplog.records if "is also in" in r.getMessage() or "valid pairs in" in r.getMessage()]
    assert re.search(r"trained: best valid NDCG@10 \d\.\d{4} at epoch 1 ", capsys.readouterr().out)


def test_without_valid_the_summary_names_the_training_loss(dataset, tmp_path, capsys):
    out = tmp_path / "r"
    assert _train(dataset, out) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("trained:"))
    loss = json.loads((out / "log.jsonl").read_text().splitlines()[0])["loss"]  # the history keys are unchanged
    assert line.startswith(f"trained: best train loss {loss:.4f} at epoch 1 "), line
    assert "best valid" not in line


@pytest.mark.parametrize("setting, flag", [
    ("data.item_multi=genres", "--items"),
    ("data.item_numeric=year", "--items"),
    ("data.user_categorical=gender", "--users"),
])
def test_feature_columns_without_their_table_are_refused(dataset, tmp_path, capsys, setting, flag):
    assert _train(dataset, tmp_path / "r", setting) == 2
    err = capsys.readouterr().err
    name, value = setting.split("=")
    assert f"{name}={value}" in err and f"pass {flag} FILE" in err
    assert not (tmp_path / "r").exists()


def test_feature_columns_with_their_table_train(dataset, tmp_path):
    out = tmp_path / "r"
    assert _train(dataset, out, "--items", str(dataset["items"]), "data.item_multi=genres", "data.item_numeric=year") == 0
    assert (out / "features" / "items.json").exists()


def test_the_named_dataset_warns_that_feature_settings_are_ignored(caplog):
    from twotower.config import DataConfig
    from twotower.pipeline.sources import _check_feature_tables

    with caplog.at_level(logging.WARNING):
        _check_feature_tables(DataConfig(dataset="movielens-100k", item_multi=("genres",)))
    assert "data.item_multi=genres ignored" in caplog.text and "--items FILE" in caplog.text


def _stopped_in_epoch_3(monkeypatch, stop) -> None:
    """Epoch 3 of the fit calls ``stop()`` first (a Ctrl-C, a SIGTERM); the others run as they do."""
    from twotower.training.trainer import Trainer

    real_epoch = Trainer._run_epoch

    def run_epoch(self, epoch):
        if epoch == 3:
            stop()
        return real_epoch(self, epoch)

    monkeypatch.setattr(Trainer, "_run_epoch", run_epoch)


def test_ctrl_c_says_what_the_checkpoint_holds_and_how_to_resume(dataset, tmp_path, capsys, monkeypatch):
    """Ctrl-C in a long fit used to print only "interrupted": nothing said whether the epochs were lost."""
    out = tmp_path / "r"
    args = ["--valid", str(dataset["valid"]), "--epochs", "3"]

    def ctrl_c():
        raise KeyboardInterrupt

    _stopped_in_epoch_3(monkeypatch, ctrl_c)
    assert _train(dataset, out, *args) == 130
    err = capsys.readouterr().err
    assert f"interrupted: {out / 'checkpoint'} holds epoch 2" in err and "with --resume to continue" in err
    monkeypatch.undo()
    assert _train(dataset, out, *args, "--resume") == 0
    assert [json.loads(line)["epoch"] for line in (out / "log.jsonl").read_text().splitlines()] == [1, 2, 3]


def test_sigterm_stops_like_ctrl_c_with_the_resume_hint_and_status_143(dataset, tmp_path, capsys, monkeypatch):
    """A scheduler's preemption (SIGTERM) used to end Python on the spot: no word on the checkpoint."""
    import os
    import signal

    out = tmp_path / "r"
    args = ["--valid", str(dataset["valid"]), "--epochs", "3"]
    # the real signal, delivered to this (main) thread
    _stopped_in_epoch_3(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert _train(dataset, out, *args) == 143
    err = capsys.readouterr().err
    assert f"terminated (SIGTERM): {out / 'checkpoint'} holds epoch 2" in err and "with --resume" in err
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command
    assert not [p for p in out.rglob("*") if ".tmp" in p.name]  # atomic writes cleaned up on the way out
    monkeypatch.undo()
    assert _train(dataset, out, *args, "--resume") == 0


def test_sigterm_under_torchrun_says_a_failing_rank_may_have_caused_it(dataset, tmp_path, capsys, monkeypatch):
    """torchrun stops the other ranks with SIGTERM when one fails: rank 0 said only "no epoch was checkpointed
    ...; run the command again", which read as the cause and sent the user to repeat the failing command."""
    import os
    import signal

    from twotower.training import distributed as tdist

    out = tmp_path / "r"

    def peer_failed():
        monkeypatch.setattr(tdist, "world_size", lambda: 2)  # from here on, rank 0 of two
        os.kill(os.getpid(), signal.SIGTERM)

    _stopped_in_epoch_3(monkeypatch, peer_failed)
    assert _train(dataset, out, "--valid", str(dataset["valid"]), "--epochs", "3") == 143
    err = capsys.readouterr().err
    assert f"terminated (SIGTERM): {out / 'checkpoint'} holds epoch 2" in err
    assert "a SIGTERM also stops every rank when one of them fails: a `[rank N] error:` line" in err


def test_ctrl_c_before_any_checkpoint_says_there_is_nothing_to_resume(dataset, tmp_path, capsys, monkeypatch):
    from twotower.training.trainer import Trainer

    def interrupted(self, epoch):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_run_epoch", interrupted)
    assert _train(dataset, tmp_path / "r") == 130
    assert "no epoch was checkpointed, so there is nothing to resume" in capsys.readouterr().err


def test_ctrl_c_without_checkpointing_says_the_best_weights_are_kept_and_how_to_resume_next_time(
        dataset, tmp_path, capsys, monkeypatch):
    # it said "no epoch was checkpointed ... run the command again" while model.safetensors held the best epoch
    out = tmp_path / "r"

    def ctrl_c():
        raise KeyboardInterrupt

    _stopped_in_epoch_3(monkeypatch, ctrl_c)
    assert _train(dataset, out, "--valid", str(dataset["valid"]), "--epochs", "3", "train.checkpoint=false") == 130
    err = capsys.readouterr().err
    assert f"interrupted: {out / 'model.safetensors'} holds the best weights validated so far" in err
    assert "train.checkpoint=false, so there is no checkpoint to --resume from" in err
    assert "nothing to resume; run the command again" not in err
    assert not (out / "checkpoint").exists()


def test_early_stopping_and_the_time_budget_say_that_they_ended_the_fit(dataset, tmp_path, monkeypatch, capsys,
                                                                        caplog):
    # audit: a fit ended by train.patience printed "(2 epochs, ...)" and nothing else, on the first run as on
    # a --resume of it, so an early stop could not be told from a schedule of 2 epochs
    from twotower.training.trainer import Trainer

    values = iter([0.5, 0.4, 0.3, 0.2, 0.1])  # validation only gets worse after epoch 1
    monkeypatch.setattr(Trainer, "validate", lambda self: {"NDCG@10": next(values)})
    # the item-item term validates after the fit too: the stubbed figures are the epochs' alone
    out, valid = tmp_path / "r", ["--valid", str(dataset["valid"]), "--epochs", "5", "train.patience=1",
                                  "model.item_item.enabled=false"]
    for resume in ([], ["--resume"]):
        with caplog.at_level(logging.INFO, logger="twotower.training.trainer"):
            assert _train(dataset, out, *valid, *resume) == 0
        line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("trained:"))
        assert "at epoch 1 (2 epochs, stopped by early stopping: valid NDCG@10 not improved for 1 evaluations" in line, line
        assert "stopping after epoch 2 of 5: early stopping" in caplog.text
        assert not [r for r in caplog.records if "epoch 2/5" in r.getMessage() and "to go" in r.getMessage()]
        caplog.clear()
    monkeypatch.undo()
    losses = iter([1.0, 2.0, 3.0])  # no validation data: the training loss decides, and the line says so
    monkeypatch.setattr(Trainer, "_run_epoch", lambda self, epoch: {"epoch": epoch, "loss": next(losses),
                                                                   "inbatch_accuracy": 0.0, "examples_per_s": 1.0})
    assert _train(dataset, tmp_path / "c", "--epochs", "5", "train.patience=1") == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("trained:"))
    assert "(2 epochs, stopped by early stopping: train loss not lowered for 1 evaluations since epoch 1" in line, line
    monkeypatch.undo()
    assert _train(dataset, tmp_path / "b", "--epochs", "5", "train.time_budget_min=0.00001") == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("trained:"))
    assert "(1 epoch, stopped by time budget: " in line and "train.time_budget_min=1e-05" in line, line
    # the time spent in the unit it was spent in: "0.0 min of training reached ...=1e-05" read as not reached
    spent = float(line.split("stopped by time budget: ")[1].split("s of training")[0])
    assert spent > 0, line


def test_ctrl_c_under_torchrun_is_reported_by_rank_0_only(dataset, tmp_path, capsys, monkeypatch):
    # audit: kill -INT on torchrun (2 ranks) printed the "interrupted: ... holds epoch 1" line once per rank;
    # here the process plays rank 1 where the command reads its rank
    from twotower.training import distributed as tdist
    from twotower.training.trainer import Trainer

    def interrupted(self, epoch):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "_run_epoch", interrupted)
    monkeypatch.setattr(tdist, "is_main", lambda: False)
    assert _train(dataset, tmp_path / "r") == 130
    assert "interrupted" not in capsys.readouterr().err


def test_the_summary_of_a_resumed_fit_says_how_many_epochs_its_seconds_cover(dataset, tmp_path, capsys):
    # audit: after a kill at epoch 2 of 4 and --resume, "(4 epochs, 7.2s)" gave this command's time for all 4
    out, args = tmp_path / "r", ["--valid", str(dataset["valid"]), "train.patience=100"]
    assert _train(dataset, out, *args, "--epochs", "2") == 0
    assert re.search(r"\(2 epochs, \d+\.\ds\); run folder", capsys.readouterr().out)
    assert _train(dataset, out, *args, "--epochs", "3", "--resume") == 0
    assert re.search(r"\(3 epochs, resumed after epoch 2: 1 in \d+\.\ds\); run folder", capsys.readouterr().out)


def test_the_epoch_the_time_budget_ends_on_is_validated(dataset, tmp_path, capsys):
    # audit: with train.eval_every=2 a budget that ran out after epoch 3 of 6 (MovieLens-100K) stopped the fit
    # with epoch 3 never validated (it would have been the best); here it runs out after epoch 1
    out = tmp_path / "r"
    assert _train(dataset, out, "--valid", str(dataset["valid"]), "--epochs", "5", "train.eval_every=2",
                  "train.time_budget_min=0.00001") == 0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1] and "valid_NDCG@10" in log[0]
    assert "at epoch 1 (1 epoch, stopped by time budget" in capsys.readouterr().out


def test_config_json_records_the_data_files_so_another_folder_reads_the_same_ones(dataset, tmp_path, monkeypatch):
    # recorded as given ("data/train.csv"), `train --config R/config.json` from another folder failed with
    # "file data/train.csv: file not found" (or read another folder's file of that name)
    home = tmp_path / "project"
    shutil.copytree(dataset["train"].parent, home / "data")
    monkeypatch.chdir(home)
    assert main(["-q", "train", "--train", "data/train.csv", "--valid", "data/valid.csv", "--out", "R", *FAST]) == 0
    data = json.loads((home / "R" / "config.json").read_text())["data"]
    assert (data["train"], data["valid"]) == (str(home / "data" / "train.csv"), str(home / "data" / "valid.csv"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["-q", "train", "--config", str(home / "R" / "config.json"), "--out", "R2"]) == 0
    # and a resume given the same relative files again, from the first folder, finds nothing changed
    monkeypatch.chdir(home)
    assert main(["-q", "train", "--train", "data/train.csv", "--valid", "data/valid.csv", "--out", "R", "--resume",
                 *FAST[:-1], "2"]) == 0


def test_train_takes_the_encoder_backend_its_error_names(dataset, tmp_path, capsys, monkeypatch):
    # the backend of the item text embeddings was settable only as TWOTOWER_ENCODER_BACKEND: `train --encoder-backend`
    # was "unrecognized arguments", though a bad value in the variable said "set it with --encoder-backend"
    import twotower.pipeline.run as run_mod

    monkeypatch.delenv("TWOTOWER_ENCODER_BACKEND", raising=False)
    seen = []

    def fake_train_run(cfg, out, resume=False):
        import os

        seen.append((os.environ.get("TWOTOWER_ENCODER_BACKEND"), cfg.train.encoder_backend))
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "train_run", fake_train_run)
    _train(dataset, tmp_path / "r", "--valid", str(dataset["valid"]), "--encoder-backend", "torch-bf16")
    # the flag is train.encoder_backend, which the run's config.json records, so `--config RUN/config.json` replays it
    assert seen == [("torch-bf16", "torch-bf16")]
    assert _train(dataset, tmp_path / "r1", "--encoder-backend", "torch-bf16", "train.encoder_backend=torch") == 2
    assert "--encoder-backend torch-bf16 and the override train.encoder_backend=\"torch\" set the same setting" \
        in capsys.readouterr().err
    monkeypatch.delenv("TWOTOWER_ENCODER_BACKEND", raising=False)
    assert _train(dataset, tmp_path / "r2", "--encoder-backend", "torch-bf17") == 2
    assert "invalid choice: 'torch-bf17'" in capsys.readouterr().err


def test_an_encoder_flag_without_item_text_says_it_has_no_effect(dataset, tmp_path, caplog, monkeypatch):
    import twotower.pipeline.run as run_mod

    def stop(cfg, out, resume=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "train_run", stop)
    monkeypatch.delenv("TWOTOWER_ENCODER_BACKEND", raising=False)
    for extra, said in (([], True), (["model.item.dual_head=true"], False)):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            _train(dataset, tmp_path / "r", "--valid", str(dataset["valid"]), "--encoder-backend", "torch", *extra)
        assert ("--encoder-backend has no effect: the item tower reads no text" in caplog.text) is said, caplog.text
    # the setting from a config file or an override is its flag's shortcut's source: told the same
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _train(dataset, tmp_path / "r", "--valid", str(dataset["valid"]), "train.encoder_backend=torch-bf16")
    assert "train.encoder_backend='torch-bf16' has no effect: the item tower reads no text" in caplog.text, caplog.text


def test_a_data_flag_replaces_the_config_files_split_files(dataset, tmp_path, capsys, caplog):
    """`--config RUN/config.json --data new.csv`: a run's config holds its split files (data.train outranks
    data.path), so the run's old split was trained on, with a warning naming a --train nobody typed."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"data": {"train": str(dataset["train"]), "valid": str(dataset["valid"])}}))
    with caplog.at_level(logging.INFO, logger="twotower"):
        assert main(["train", "--config", str(cfg), "--data", str(dataset["train"]), "--print-config"]) == 0
    data = json.loads(capsys.readouterr().out)["data"]
    assert (data["path"], data["train"], data["valid"]) == (str(dataset["train"]), None, None)
    assert f"--data replaces the data input of --config {cfg}: its data.train, data.valid are not read" in caplog.text
    # given on the command line too, a setting stays: --valid is the user's own choice
    assert main(["train", "--config", str(cfg), "--data", str(dataset["train"]), "--valid", str(dataset["valid"]),
                 "--print-config"]) == 0
    data = json.loads(capsys.readouterr().out)["data"]
    assert (data["train"], data["valid"]) == (None, str(dataset["valid"]))


def test_resume_of_a_folder_without_a_run_says_so(tmp_path, capsys):
    # it said "no training data: pass --train FILE ...", sending a user who meant to continue a run to start another
    assert main(["train", "--resume", "--out", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"error: --resume: {tmp_path / 'nothing'} holds no run to continue (no config.json there); check --out, or "
        "train a new run without --resume")


@pytest.mark.parametrize("typed", ["data.path={train}", "data.dataset=movielens-100k"])
def test_a_data_override_replaces_the_config_files_data_input_as_its_flag_does(typed, dataset, tmp_path, capsys, caplog):
    # `--config run.toml data.path=new.csv` trained on the file's data.train, with a warning naming a --train and a
    # --data nobody typed, where `--data new.csv` replaced the file's whole data input
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"data": {"train": str(dataset["train"]), "valid": str(dataset["valid"])}}))
    typed = typed.format(train=dataset["train"])
    with caplog.at_level(logging.INFO, logger="twotower"):
        assert main(["train", "--config", str(cfg), typed, "--print-config"]) == 0
    data = json.loads(capsys.readouterr().out)["data"]
    assert (data["train"], data["valid"]) == (None, None)
    assert f"{typed} replaces the data input of --config {cfg}: its data.train, data.valid are not read" in caplog.text


def test_the_unread_training_input_is_named_by_where_each_was_given(dataset, tmp_path, monkeypatch, caplog):
    # "data.train (..., --train) is the training input; data.path (..., --data) is not read" named flags the user
    # never typed: the values came from a config file and an override
    import twotower.pipeline.run as run_mod
    from twotower.pipeline.sources import load_sources

    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\npath = "{dataset["valid"]}"\n', encoding="utf-8")
    seen = []

    def fake_train_run(cfg, out, resume=False):
        seen.append(cfg)
        raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "train_run", fake_train_run)
    for typed, said in ((["--train", str(dataset["train"])], "--train"),
                        ([f"data.train={dataset['train']}"], "override")):
        seen.clear()
        caplog.clear()
        main(["-q", "train", "--config", str(cfg), "--out", str(tmp_path / "r"), *typed])
        with caplog.at_level(logging.WARNING, logger="twotower.pipeline.sources"):
            load_sources(seen[0].data)
        assert (f"data.train ({dataset['train']}, {said}) is the training input; data.path ({dataset['valid']}, "
                f"config file {cfg}) is not read") in caplog.text, caplog.text
