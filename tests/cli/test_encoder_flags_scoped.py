"""``--encoder-backend`` / ``--encoder-threads`` hold for their command alone.

The CLI hands them to the encoders through ``TWOTOWER_ENCODER_BACKEND`` / ``TWOTOWER_ENCODER_THREADS`` and left both
set for the rest of the process: in a notebook (or a test) calling ``main()`` after a ``train --encoder-backend onnx``,
the next ``train`` or ``search`` command, given no such flag, embedded the item titles with onnx and recorded it in
its config.json.
"""
from __future__ import annotations

import os

from twotower.cli.main import main

ENCODER_ENV = ("TWOTOWER_ENCODER_BACKEND", "TWOTOWER_ENCODER_THREADS")


def _train_with_encoder_flags(tmp_path) -> None:
    # a training file without the run's columns: the command stops once the flags are handed on, before any training
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n", encoding="utf-8")
    assert main(["-q", "train", "--train", str(bad), "--out", str(tmp_path / "run"), "--no-eval",
                 "--encoder-backend", "onnx", "--encoder-threads", "1", "train.threads=1"]) == 2


def test_the_encoder_flags_are_not_left_to_the_next_command(tmp_path, monkeypatch, capsys) -> None:
    for name in ENCODER_ENV:
        monkeypatch.delenv(name, raising=False)  # and put back as it was, whatever main leaves
    _train_with_encoder_flags(tmp_path)
    assert [name for name in ENCODER_ENV if name in os.environ] == []


def test_the_callers_encoder_variables_stay_theirs(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch-bf16")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "3")
    _train_with_encoder_flags(tmp_path)
    assert (os.environ["TWOTOWER_ENCODER_BACKEND"], os.environ["TWOTOWER_ENCODER_THREADS"]) == ("torch-bf16", "3")
