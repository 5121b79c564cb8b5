"""The words a refusal is given in on the CLI and from Python, for tests comparing them with HTTP's."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from twotower.cli.main import main
from twotower.errors import TwoTowerError


def cli_refusal(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of a refused command, without its ``error: `` lead."""
    capsys.readouterr()  # what earlier commands of the test printed
    assert main(list(argv)) != 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, lines
    return lines[0].removeprefix("error: ")


def py_refusal(fn: Callable[[], Any]) -> str:
    """What ``fn()`` was refused with."""
    with pytest.raises(TwoTowerError) as e:
        fn()
    return str(e.value)
