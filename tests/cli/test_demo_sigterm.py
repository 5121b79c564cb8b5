"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) during `twotower demo` stops it as Ctrl-C does, and one line
says what its run folder holds and what to run next, as `twotower train` says (status 143).

Walk: `kill -TERM` of `twotower demo --out dm` (ML-100K) after its first epoch was checkpointed ended on the spot
without a word, status -15: dm/checkpoint held the epoch, and nothing said that `train --out dm --resume` goes on.
"""
from __future__ import annotations

import json
import os
import signal
from types import SimpleNamespace

import pandas as pd
import pytest

from twotower.cli.main import main


@pytest.fixture
def stopped_after_an_epoch(monkeypatch, tmp_path):
    """MovieLens-100K stood in by three users; "training" checkpoints epoch 1, then gets the real SIGTERM."""
    import twotower.data.movielens as movielens
    import twotower.pipeline.run as run

    frame = pd.DataFrame({"user_id": ["1", "2", "943"], "item_id": ["50", "181", "50"], "timestamp": [1, 2, 3]})
    monkeypatch.setattr(movielens, "fetch_movielens_100k", lambda *a, **k: tmp_path)
    monkeypatch.setattr(movielens, "load_movielens_100k", lambda *a, **k: SimpleNamespace(interactions=frame))

    def checkpoint_then_sigterm(cfg, out, **kwargs):  # noqa: ANN001, ANN003, ANN202
        (out / "checkpoint").mkdir(parents=True)
        (out / "checkpoint" / "state.json").write_text(json.dumps({"epoch": 1, "best_epoch": 1}))
        # the real signal, to this (main) thread; without a handler it would end pytest itself, so that is said
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL, "SIGTERM would end the process on the spot"
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the command")

    monkeypatch.setattr(run, "train_run", checkpoint_then_sigterm)
    monkeypatch.chdir(tmp_path)


def test_sigterm_mid_demo_training_says_the_checkpoint_and_the_resume(stopped_after_an_epoch, capsys):
    assert main(["demo", "--out", "dm", "--user", "1", "--threads", "1"]) == 143  # the shell's status for SIGTERM
    err = capsys.readouterr().err.strip().splitlines()[-1]
    # demo has no --resume: "run the same command with --resume" would be refused, so train's resume is named
    # and then the demo's own steps, which resumed training alone leaves out (its test table, plot, recommendations)
    assert err == ("terminated (SIGTERM): dm/checkpoint holds epoch 1 (best so far: epoch 1); continue from there "
                   "with `twotower train --out dm --resume` (it reads the run's settings and data; without --resume "
                   "it starts over), then `twotower evaluate --run dm` for the test table; or run `twotower demo "
                   "--out dm` again for every step of the demo")
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command
