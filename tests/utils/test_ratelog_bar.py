"""RateLog (evaluate, recommend --users all, similar --items all, index adds, text encoding): a bar on a terminal,
periodic lines off one, as training's display."""
from __future__ import annotations

import io
import logging
import sys

import pytest

from twotower.utils import progress


class _Tty(io.StringIO):
    """A stderr that says it is a terminal (with no descriptor to ask its width) and keeps what tqdm writes."""

    def isatty(self) -> bool:
        return True


def _count(logger: logging.Logger, every_s: float | None) -> None:
    rates = progress.RateLog(logger, "recommending", 4, "users", every_s, rate_unit="users")
    for done in range(1, 5):
        rates.update(done)


def test_a_terminal_gets_a_bar_not_lines(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # before: `twotower evaluate` / `recommend --users all` on a terminal printed the same log lines as in a file
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    logger = logging.getLogger("twotower.test.ratelog")
    with caplog.at_level(logging.INFO, logger=logger.name):
        _count(logger, 0.0)
    assert "recommending:" in tty.getvalue() and "users/s" in tty.getvalue()
    assert not [r for r in caplog.records if "recommending" in r.getMessage()]


def test_off_a_terminal_lines_and_silent_without_an_interval(monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    logger = logging.getLogger("twotower.test.ratelog")
    with caplog.at_level(logging.INFO, logger=logger.name):
        _count(logger, 0.0)
    assert any("recommending: 4 / 4 users" in r.getMessage() for r in caplog.records)
    caplog.clear()
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with caplog.at_level(logging.INFO, logger=logger.name):
        _count(logger, None)  # progress off (train.progress=false): neither bar nor lines
    assert tty.getvalue() == "" and not caplog.records


def test_quiet_shows_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    logger = logging.getLogger("twotower.test.ratelog.quiet")
    logger.setLevel(logging.WARNING)
    _count(logger, 0.0)
    assert tty.getvalue() == ""


def test_a_grid_extended_while_it_runs_counts_its_new_steps(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    # ItemKNN's k grid, extended downwards after its 6 settings, said "7 / 6 tried ..., ETA -0s"
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    logger = logging.getLogger("twotower.test.ratelog.grow")
    with caplog.at_level(logging.INFO, logger=logger.name):
        rates = progress.RateLog(logger, "tuning", 2, "tried", 0.0)
        rates.update(1)
        rates.update(2)
        rates.grow()
        rates.update(3)
    said = [r.getMessage() for r in caplog.records]
    assert said[-1].startswith("tuning: 3 / 3 tried") and "ETA 0s" in said[-1] and "-0s" not in " ".join(said)
