"""After a kill and ``--resume`` the run's model.safetensors holds the weights of the epoch it reports as best.

Walkthrough finding: the best weights were written before the epoch's checkpoint, so a kill in between (the
checkpoint is the slowest write) left model.safetensors one epoch ahead of the checkpoint. A resume that did
not retrain that epoch into a new best (stopped at the checkpoint's epoch, a time budget reached, other
threads or settings) then kept those orphan weights while reporting the checkpoint's best epoch.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main

# no validation file: the best epoch is the one with the lowest training loss, which falls every epoch here
FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8",
        "train.threads=1", "train.patience=100", "eval.baselines=[]", "data.rating_col=null", "--no-progress",
        "--no-eval"]


def _train(data: dict[str, Path], out: Path, epochs: int, *extra: str) -> int:
    return main(["-q", "train", "--train", str(data["train"]), "--out", str(out), "--epochs", str(epochs), *FAST,
                 *extra])


def _weights(run: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(run / "model.safetensors"))


@pytest.mark.parametrize("ema", [False, True])
@pytest.mark.parametrize("writing", ["save_checkpoint", "save_weights"])
def test_a_kill_while_epoch_3_is_saved_then_resume_keeps_the_reported_best(tmp_path, monkeypatch, writing, ema):
    import twotower.training.hooks as trainer  # the epoch's writes (hooks.save_epoch)

    data = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    extra = ("train.ema_decay=0.5",) if ema else ("train.ema_decay=0",)
    refs = {}
    for epochs in (2, 3):  # uninterrupted runs: the weights each epoch ends with
        refs[epochs] = tmp_path / f"ref{epochs}"
        assert _train(data, refs[epochs], epochs, *extra) == 0
    real_save = getattr(trainer, writing)
    calls = {"n": 0}

    def killed_at_epoch_3(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:  # epoch 3's checkpoint or best weights (each epoch is a new best): the process dies
            raise KeyboardInterrupt
        return real_save(*a, **k)

    out = tmp_path / "run"
    monkeypatch.setattr(trainer, writing, killed_at_epoch_3)
    assert _train(data, out, 3, *extra) == 130
    monkeypatch.undo()
    # resumed with --epochs 2: nothing is retrained, the run ends with what the checkpoint calls the best
    assert _train(data, out, 2, *extra, "--resume") == 0
    best = json.loads((out / "checkpoint" / "state.json").read_text())["best_epoch"]
    assert [json.loads(line)["epoch"] for line in (out / "log.jsonl").read_text().splitlines()][-1] >= best
    got, want = _weights(out), _weights(refs[best])
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=f"{k}: not the weights of the best epoch {best}")


def test_resume_of_a_run_without_a_weight_average_starts_one(tmp_path, caplog):
    """A run trained without a weight average (train.ema_decay=0, or before it was the default) resumed with one:
    the average starts at the resumed weights, where it refused the checkpoint before."""
    data = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    out = tmp_path / "run"
    assert _train(data, out, 1, "train.ema_decay=0") == 0
    assert not (out / "checkpoint" / "average.safetensors").exists()
    args = ["train", "--train", str(data["train"]), "--out", str(out), *FAST]
    caplog.set_level(logging.INFO, logger="twotower")
    # the default train.ema_decay, given: a resume keeps the run's own settings (0 here) unless told otherwise
    assert main([*args, "--epochs", "2", "--resume", "train.ema_decay=0.99"]) == 0
    assert (out / "checkpoint" / "average.safetensors").exists()
    assert json.loads((out / "checkpoint" / "state.json").read_text())["epoch"] == 2
    err = caplog.text
    # the changed setting is said, not silently read as the run's own
    assert "resume: these settings differ from the run's and apply from here on: train.ema_decay: 0" in err
    assert "0.99 now" in err and "holds no weight average" in err
    # asking for no more epochs than the checkpoint holds says so, instead of "0 in 0.4s"
    caplog.clear()
    before = (out / "config.json").read_text()
    assert main([*args, "--epochs", "1", "--resume", "train.lr=0.05"]) == 0
    assert "the checkpoint holds epoch 2, and train.epochs=1 asks for no more" in caplog.text
    # nothing was trained, so the run's record is as it was: it said epochs=1 and lr=0.05 for a run of 2 epochs
    # trained at the old rate, and the next resume read them as the run's own
    assert (out / "config.json").read_text() == before


def test_the_resume_line_says_what_the_best_epoch_was_chosen_on(tmp_path, caplog, monkeypatch):
    """Before: "resumed from epoch 1 (best NDCG@10=-5.9876 at epoch 1)" for a run without validation data (the
    stopper holds the negated training loss), and "(best NDCG@10=-inf at epoch 0)" when no epoch had been
    validated yet (train.eval_every); the line now reads as the summary line does."""
    import twotower.training.hooks as hooks

    data = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    out = tmp_path / "run"
    assert _train(data, out, 1) == 0
    with caplog.at_level(logging.INFO, logger="twotower.training"):
        assert _train(data, out, 2, "--resume") == 0
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("resumed from epoch"))
    loss = json.loads((out / "log.jsonl").read_text().splitlines()[0])["loss"]
    assert line == f"resumed from epoch 1 (best train loss {loss:.4f} at epoch 1)"

    held = tmp_path / "held"
    args = ["-q", "train", "--train", str(data["train"]), "--valid", str(data["valid"]), "--out", str(held),
            "--epochs", "3", "train.eval_every=2", *FAST]
    real_save = hooks.save_checkpoint
    calls = {"n": 0}

    def killed_at_epoch_2(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:  # the checkpoint keeps epoch 1, which train.eval_every=2 did not validate
            raise KeyboardInterrupt
        return real_save(*a, **k)

    monkeypatch.setattr(hooks, "save_checkpoint", killed_at_epoch_2)
    assert main(args) == 130
    monkeypatch.setattr(hooks, "save_checkpoint", real_save)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="twotower.training"):
        assert main([*args, "--resume"]) == 0
    line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("resumed from epoch"))
    assert line == "resumed from epoch 1 (no epoch validated yet)"
