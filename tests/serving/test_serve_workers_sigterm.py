"""`twotower serve --workers N` stopped while it writes the vectors its workers map, or while its supervisor starts:
the shared folder in the temporary directory is removed, as when the server is stopped once it serves.

Walk: a SIGTERM (or Ctrl-C) while `serve --workers 2` wrote item_vectors.npy printed "terminated (SIGTERM)" and
left /tmp/twotower-serve-PID-XXXX with the half-written file (the size of the catalogue's vectors, on a tmpfs held
in memory) until the next `serve` swept it; one while the supervisor it execs imported uvicorn ended that process
on the spot (status -15), the folder with the whole vectors left the same way.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

import twotower.cli.main as cli
import twotower.serving.workers as workers
from tests.real_sigterm import send_sigterm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _left() -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"twotower-serve-{os.getpid()}-*"))


def _ctrl_c() -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(("stop", "status", "said"), [(send_sigterm, 143, "terminated (SIGTERM)"),
                                                      (_ctrl_c, 130, "interrupted")], ids=["sigterm", "ctrl-c"])
def test_a_server_stopped_while_it_shares_the_vectors_leaves_no_folder(run_dir, monkeypatch, capsys, stop, status,
                                                                      said):
    real_save = np.save

    def save_then_stop(f, arr, **kwargs):  # noqa: ANN001, ANN003, ANN202 - half the vectors written, then the signal
        real_save(f, arr[: len(arr) // 2], **kwargs)
        stop()

    monkeypatch.setattr(workers.np, "save", save_then_stop)
    monkeypatch.setattr(workers, "supervise", lambda *a, **k: pytest.fail("the server went on to start its workers"))
    assert not _left()
    rc = cli.main(["serve", "--run", str(run_dir), "--workers", "2", "--port", str(_free_port()), "--threads", "1"])
    assert (rc, capsys.readouterr().err.splitlines()[-1]) == (status, said)
    assert not _left()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


# the supervisor `serve --workers N` execs (python -m twotower.serving.workers), sent the real SIGTERM by its own
# import of uvicorn, before uvicorn's supervisor is there to catch it
SUPERVISOR = """
import os, runpy, signal, sys

class SigtermOnUvicorn:
    def find_spec(self, name, path=None, target=None):
        if name == "uvicorn":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGTERM)
        return None

sys.meta_path.insert(0, SigtermOnUvicorn())
runpy.run_module("twotower.serving.workers", run_name="__main__", alter_sys=True)
"""


def test_a_supervisor_stopped_as_it_starts_removes_the_shared_folder(run_dir, service, tmp_path):
    from twotower.serving.settings import ServiceSettings

    shared = tmp_path / "twotower-serve-shared"
    shared.mkdir()
    workers.share_arrays(service, shared)
    spec = workers.WorkerSpec(shared_dir=str(shared), settings=asdict(ServiceSettings(port=_free_port())),
                              run_dir=str(run_dir), fingerprint=service.fingerprint).write()
    out = subprocess.run([sys.executable, "-c", SUPERVISOR, str(spec), "2", "warning", "30"], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, TWOTOWER_THREADS="1"))
    assert out.returncode == -signal.SIGTERM, out.stderr  # as a supervisor stopped once it serves ends
    assert not shared.exists(), (sorted(p.name for p in shared.iterdir()), out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
