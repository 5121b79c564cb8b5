"""What a training epoch's progress display shows: a bar on a terminal, log lines elsewhere, nothing under -q."""
from __future__ import annotations

import logging

import pytest

from twotower.training import loop, progress


class _Tty:
    """A stderr that says it is a terminal and swallows what tqdm writes."""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize(("level", "bar"), [(logging.INFO, True), (logging.WARNING, False)])
def test_bar_on_a_terminal_follows_the_log_level(monkeypatch: pytest.MonkeyPatch, level: int, bar: bool) -> None:
    # `twotower -q` sets WARNING: a quiet run shows no bar on a terminal, as it logs no progress lines off one
    monkeypatch.setattr(progress.sys, "stderr", _Tty())
    logger = logging.getLogger(loop.__name__)
    old = logger.level
    logger.setLevel(level)
    try:
        prog = loop.Progress("epoch 1", 4, 16, enabled=True, every_s=30.0)
        assert (prog.bar is not None) is bar
        prog.close()
    finally:
        logger.setLevel(old)


def test_the_shown_loss_is_the_running_mean_of_the_steps_losses(caplog: pytest.LogCaptureFixture) -> None:
    # the loop shows what the closures return; under torchrun the trainer's closures now return the global batch's
    # loss (the loop scaled rank 0's share by the world size, which was not the epoch line's loss: see the
    # torchrun test below)
    import torch

    w = torch.nn.Parameter(torch.zeros(2))
    tl = loop.TrainLoop([w], lr=0.1, progress=True, log_every_s=1e-9)
    losses = iter([1.0, 2.0])
    with caplog.at_level(logging.INFO, logger=loop.__name__), tl.epoch(1, n_batches=2, n_examples=8) as ep:
        for _ in range(2):
            ep.step(lambda: (next(losses), 4))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "loss 1.0000" in lines[0] and "loss 1.5000" in lines[1], lines
    assert ep.mean_loss == 1.5


def test_a_slow_rate_keeps_its_decimals(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    # a cross-encoder trains at under one example a second here: "1 examples/s" misread 0.8
    clock = iter([0.0, 10.0, 20.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    p = loop.Progress("cross-encoder", n_batches=4, n_examples=32, enabled=True, every_s=5.0)
    with caplog.at_level(logging.INFO, logger=loop.__name__):
        p.update(8, 0.5)  # 8 examples in 10 s
        p.update(8, 0.5)  # 16 in 20 s
    lines = [r.getMessage() for r in caplog.records]
    assert any("0.80 examples/s" in line for line in lines), lines


def test_a_terminal_of_zero_columns_gets_the_log_lines(monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """Before: a terminal reporting 0 columns (`script` without a terminal, some CI runners) got a tqdm bar that
    drew empty lines, and no progress lines, so a long epoch said nothing at all."""
    import os

    class _NarrowTty(_Tty):
        def fileno(self) -> int:
            return 2

    monkeypatch.setattr(progress.sys, "stderr", _NarrowTty())
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((0, 0)))
    with caplog.at_level(logging.INFO, logger=loop.__name__):
        prog = loop.Progress("epoch 1", 4, 16, enabled=True, every_s=1e-9)
        assert prog.bar is None
        prog.update(4, 1.25)
        prog.close()
    assert "epoch 1: batch 1/4" in caplog.text
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((80, 24)))
    with caplog.at_level(logging.INFO, logger=loop.__name__):
        prog = loop.Progress("epoch 1", 4, 16, enabled=True, every_s=1e-9)
        assert prog.bar is not None  # a terminal with a width keeps its bar
        prog.close()


def test_under_torchrun_the_last_progress_line_shows_the_loss_of_the_epoch_line(tmp_path) -> None:
    """Docs: the logged loss is reduced over ranks, the value one process logs. Rank 0's progress lines showed its
    own share × the world size instead: `batch 20/20, ... loss 7.8224` above `epoch 1/1: loss 7.8176`."""
    import os
    import re
    import subprocess
    import sys

    from tests.synthetic import write_dataset

    data = write_dataset(tmp_path / "data")
    env = {**os.environ, "TWOTOWER_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "twotower",
           "train", "--train", str(data["train"]), "--out", str(tmp_path / "run"), "--epochs", "1", "--no-eval",
           "train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
           "model.item.out_dim=8", "model.user.history_len=4", "train.threads=1", "train.log_every_s=1e-9",
           "eval.baselines=[]", "model.item_item.enabled=false"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = re.findall(r"epoch 1: batch (\d+)/(\d+), .* loss (\d+\.\d+)", proc.stderr)
    assert len(shown) > 1 and shown[-1][0] == shown[-1][1], proc.stderr[-3000:]  # a line for every batch, the last too
    epoch = re.search(r"epoch 1/1: loss (\d+\.\d+)", proc.stderr + proc.stdout)
    assert epoch is not None, proc.stderr[-3000:]
    assert shown[-1][2] == epoch.group(1)
