"""The `twotower` process ends without the interpreter's last collections tracing every object alive.

After a SIGTERM or Ctrl-C (or any command) printed its last line, the interpreter's teardown traced the
millions of objects torch, pandas and scipy had made: 5-6 s on a busy machine before the process a scheduler
waits on was gone. They are frozen at exit (gc.freeze) and left to the operating system.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")

# an exit handler registered before the CLI's module is imported runs after the CLI's own (last in, first out):
# it sees what the interpreter's teardown will find
PROBE = """
import atexit, gc, os
atexit.register(lambda: os.write(1, f"frozen={gc.get_freeze_count()}\\n".encode()))
from twotower.cli.main import main
import sys
rc = main(sys.argv[1:])
os.write(1, f"rc={rc}\\n".encode())
sys.exit(rc)
"""


def _exit_probe(*argv: str) -> dict[str, int]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], env=env, capture_output=True, text=True, timeout=120)
    lines = [line.split("=", 1) for line in r.stdout.splitlines() if line.startswith(("frozen=", "rc="))]
    return {k: int(v) for k, v in lines}


def test_objects_alive_at_exit_are_frozen_for_a_command_that_ends_normally():
    got = _exit_probe("train", "--help")
    assert got["rc"] == 0
    assert got["frozen"] > 1000  # the modules' objects, not traced again by the teardown's collections


def test_objects_alive_at_exit_are_frozen_for_a_command_that_fails():
    got = _exit_probe("evaluate", "--run", "/nonexistent/run")
    assert got["rc"] == 2
    assert got["frozen"] > 1000
