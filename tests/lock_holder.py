"""Another process holding a folder's writer lock, for tests of what a second writer is told."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

_HOLDER = ("import sys, time; from twotower.utils.folder_lock import exclusive_writer\n"
           "with exclusive_writer(sys.argv[1], sys.argv[3], 'wait', beside=sys.argv[4] == '1'):\n"
           "    print('held', flush=True); time.sleep(int(sys.argv[2]))\n")


@contextlib.contextmanager
def writer_lock_held(folder: Path, seconds: int = 120, *, what: str = "twotower train",
                     beside: bool = False) -> Iterator[subprocess.Popen]:
    """A process holding ``folder``'s writer lock as ``what`` (yielded once it holds it); SIGKILLed on exit, so the
    kernel drops its lock as it would a crashed writer's. ``beside``: the lock of a folder swapped in whole, kept
    beside it (an export or index folder outside any run)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(folder), str(seconds), what, "1" if beside else "0"], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
