"""A real SIGTERM sent from inside a command under test, and a folder's files, for the tests that check what a
stopped command leaves behind (tests/cli/test_*_sigterm.py, tests/export/test_export_sigterm.py)."""
from __future__ import annotations

import os
import signal
from pathlib import Path


def send_sigterm(*args, **kwargs):  # noqa: ANN002, ANN003, ANN201
    """Patched in for a function the command calls: the real signal, to this (main) thread. Without the command's
    handler it would end pytest itself, so that is said instead."""
    assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL, "SIGTERM would end the process on the spot"
    os.kill(os.getpid(), signal.SIGTERM)
    raise AssertionError("SIGTERM did not stop the command")


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file directly in ``folder``, name -> bytes: equal before and after means nothing was touched."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
