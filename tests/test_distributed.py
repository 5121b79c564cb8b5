"""A rank stops when its launcher dies: torchrun starts each rank in a session of its own, so a ``kill -9`` of
torchrun (or of its process group) left the ranks training on, writing the run folder and holding its lock."""
from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the launcher: starts one rank in a new session (as torchrun does), says its pid, and waits
_LAUNCHER = """
import subprocess, sys
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1]], start_new_session=True)
print(rank.pid, flush=True)
rank.wait()
"""
# rank 0 of 2: joins the process group, where it waits (rank 1 never comes)
_RANK = "from twotower.distributed import init_from_env; init_from_env('gloo')"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_rank_stops_when_its_launcher_is_killed():
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "TORCHELASTIC_RUN_ID": "test"}  # as torchrun sets it
    # the rank inherits the launcher's stdout: the pipe reads end-of-file once both have exited
    launcher = subprocess.Popen([sys.executable, "-c", _LAUNCHER, _RANK], env=env, stdout=subprocess.PIPE)
    assert launcher.stdout is not None
    rank_pid = int(launcher.stdout.readline())
    try:
        deadline = time.monotonic() + 60
        while not _listening(port):  # rank 0's store listens once it is inside init_process_group
            assert time.monotonic() < deadline, "rank 0 never reached init_process_group"
            time.sleep(0.1)
        launcher.kill()  # SIGKILL: torchrun gets no chance to pass anything on
        launcher.wait()
        ready, _, _ = select.select([launcher.stdout], [], [], 60)
        assert ready and launcher.stdout.read() == b"", "the rank outlived its launcher"
    finally:
        launcher.stdout.close()
        try:  # old code: the orphan would wait 30 minutes in init_process_group
            os.kill(rank_pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_ranks_of_another_launcher_are_left_to_it(monkeypatch):
    # a script that starts the ranks in the background and exits may leave them running on purpose
    import ctypes

    from twotower.distributed import _stop_with_launcher

    def no_prctl(*args, **kwargs):
        raise AssertionError("asked the kernel for a signal outside torchrun")

    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    monkeypatch.setattr(ctypes, "CDLL", no_prctl)
    _stop_with_launcher()  # returns without a request (and without signalling this process)
