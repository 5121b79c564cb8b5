"""What a training epoch's progress display shows: a bar on a terminal, log lines elsewhere, nothing under -q."""
from __future__ import annotations

import logging

import pytest

from twotower.training import loop


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
    monkeypatch.setattr(loop.sys, "stderr", _Tty())
    logger = logging.getLogger(loop.__name__)
    old = logger.level
    logger.setLevel(level)
    try:
        prog = loop.Progress("epoch 1", 4, 16, enabled=True, every_s=30.0)
        assert (prog.bar is not None) is bar
        prog.close()
    finally:
        logger.setLevel(old)
