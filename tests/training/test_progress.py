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


def test_shown_loss_is_scaled_from_a_ranks_share(caplog: pytest.LogCaptureFixture) -> None:
    # under torchrun (2 ranks) each rank's closure returns its share of the global batch loss: rank 0's
    # progress lines must show the loss (share × 2), as the epoch line does, not half of it
    import torch

    w = torch.nn.Parameter(torch.zeros(2))
    tl = loop.TrainLoop([w], lr=0.1, progress=True, log_every_s=1e-9, shown_loss_scale=2.0)
    with caplog.at_level(logging.INFO, logger=loop.__name__), tl.epoch(1, n_batches=2, n_examples=8) as ep:
        for _ in range(2):
            ep.step(lambda: (1.5, 4))
    lines = [r.getMessage() for r in caplog.records]
    assert lines and all("loss 3.0000" in line for line in lines), lines
    assert ep.mean_loss == 1.5  # the epoch's sums (all-reduced by the trainer) are the shares themselves


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
