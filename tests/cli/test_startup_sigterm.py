"""A SIGTERM or Ctrl-C while `twotower` starts (the parser built, its modules imported: numpy, the config) stops it
as one during the command does: "terminated (SIGTERM)" and 143, "interrupted" and 130, no traceback.

Walk: `timeout -s TERM 0.3 twotower explain --run RUN --user 1 --item 1` ended silent (status -15): the handler
was installed only once the command ran, 0.3-0.4 s after the start on a 2-core machine; a Ctrl-C then printed
a KeyboardInterrupt traceback.
"""
from __future__ import annotations

import signal

import pytest

import twotower.cli.main as cli
from tests.real_sigterm import send_sigterm


def _interrupted_while_parsing(monkeypatch: pytest.MonkeyPatch, stop) -> None:  # noqa: ANN001
    def build_parser():  # noqa: ANN202
        stop()

    monkeypatch.setattr(cli, "build_parser", build_parser)


def test_sigterm_while_the_parser_is_built(monkeypatch, capsys):
    _interrupted_while_parsing(monkeypatch, send_sigterm)
    assert cli.main(["explain", "--run", "RUN", "--user", "1", "--item", "1"]) == 143
    assert capsys.readouterr().err == "terminated (SIGTERM)\n"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command


def test_ctrl_c_while_the_parser_is_built(monkeypatch, capsys):
    def ctrl_c() -> None:
        raise KeyboardInterrupt

    _interrupted_while_parsing(monkeypatch, ctrl_c)
    try:
        rc = cli.main(["explain", "--run", "RUN", "--user", "1", "--item", "1"])
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped main: a traceback")
    assert rc == 130
    assert capsys.readouterr().err == "interrupted\n"
