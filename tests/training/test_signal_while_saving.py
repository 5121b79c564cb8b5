"""Ctrl-C or SIGTERM while an epoch is being saved lands after the save: the checkpoint holds the epoch log.jsonl shows.

Walkthrough finding: a SIGTERM (a scheduler's preemption) just after epoch 1's line was printed and its row written to
log.jsonl cut the checkpoint write in two; the run ended "no epoch was checkpointed, so there is nothing to resume"
while log.jsonl said epoch 1 had finished, and the whole epoch was lost (an epoch later, the checkpoint was one
behind the log).
"""
from __future__ import annotations

import json
import signal

import pytest

from tests.synthetic import write_dataset
from tests.training.test_resume_best_weights import _train


@pytest.fixture(autouse=True)
def _ctrl_c_handler():
    # a test run started in the background of a shell inherits an ignored SIGINT: Ctrl-C's own handler here
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_epoch_1_is_checkpointed_leaves_epoch_1_to_resume(tmp_path, monkeypatch, signum):
    import twotower.training.hooks as hooks  # the epoch's writes (hooks.save_epoch)

    data = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    real_save = hooks.save_checkpoint

    def signalled_save(*args, **kwargs):
        signal.raise_signal(signum)  # arrives as the checkpoint starts to be written
        return real_save(*args, **kwargs)

    monkeypatch.setattr(hooks, "save_checkpoint", signalled_save)
    out = tmp_path / "run"
    assert _train(data, out, 3) == 128 + signum
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1]
    assert json.loads((out / "checkpoint" / "state.json").read_text())["epoch"] == 1  # before: no checkpoint
    assert (out / "model.safetensors").is_file()  # the epoch's best weights, written with it

    monkeypatch.setattr(hooks, "save_checkpoint", real_save)
    assert _train(data, out, 3, "--resume") == 0
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2, 3]
